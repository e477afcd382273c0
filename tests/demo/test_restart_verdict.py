"""The demo's verdict on the producer-restart loop (demo/restarts.RestartResult): holds are required exactly when the
restarts outpaced the bucket."""

from demo.restarts import RestartResult


def result(held: str, elapsed: float, acknowledged: int = 10) -> RestartResult:
    marks = tuple(mark == "H" for mark in held)
    return RestartResult(marks, tuple(0.1 for _ in marks), acknowledged, burst=5, token_s=1.0, elapsed=elapsed)


def test_restarts_faster_than_the_tokens_must_be_held():
    assert result(".....HHHHH", 5.5).ok
    assert not result("..........", 3.0).ok  # 10 ids in 3 s: 5 + 3 tokens at most without a hold


def test_restarts_no_faster_than_the_tokens_need_no_hold():
    slow = result("..........", 7.9)  # seen in a loaded make test: 5 + 7.9 tokens >= 10 ids
    assert slow.ok and "no faster than the tokens" in slow.text()


def test_the_burst_is_never_held_and_every_message_is_acknowledged():
    assert not result("H....HHHHH", 5.5).ok
    assert not result(".....HHHHH", 5.5, acknowledged=9).ok
