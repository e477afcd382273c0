"""How the proxy's log lines are written: ``text`` (for a terminal) or ``json`` (one object a line, for a log
pipeline: Loki, Elasticsearch, CloudWatch, ``jq``).

The JSON formatter is the standard library's ``logging.Formatter`` with ``json.dumps``: a line is ``time`` (UTC,
ISO 8601 with milliseconds), ``level``, ``logger``, ``message``, then the context fields a call site attaches with
``extra=`` (``listener``, ``client``, ``broker``...), then ``exception`` when there is one. Every line is one JSON
object whatever a message holds (a client id with a newline or a quote is escaped by ``json.dumps``), and the
:class:`~proxy.ground.logs.BoundedLines` filter still bounds it. No library is needed for this: the formatter is a
few lines and has no configuration of its own to get wrong.
"""

from __future__ import annotations

import json
import logging
import sys
import time

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# what every LogRecord carries: anything else on a record came from ``extra=`` and is context
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


class JsonLines(logging.Formatter):
    """One JSON object a line: time, level, logger, message, the record's context fields, exception."""

    def format(self, record: logging.LogRecord) -> str:
        seconds = time.gmtime(record.created)
        line: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", seconds) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in line:
                line[key] = value if isinstance(value, (str, int, float, bool)) or value is None else str(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, ensure_ascii=False)


def configure_logging(level: str, log_format: str) -> None:
    """The root logger's one handler, on stderr, in ``log_format`` (one of LOG_FORMATS)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler])
