/* The codec's per-request byte reading in C: the same functions as the pure Python ones named beside each, the same
 * results and the same errors (class and message) for the same bytes. proxy/codec/accel.py chooses between the two;
 * tests/proxy/codec/test_accel_differential.py feeds both the same frames.
 *
 * What is read here: the request header (header.py request_header_fields), a Produce's prefix (produce_prefix.py
 * parse_request_prefix, _acks_at, _read_topics; a request of several partitions or batches is walked by the Python
 * _walk), a Fetch v0-14's replica id (fetch_prefix.py), the response prefix and header length (header.py), and the
 * skimmers of skim.py (tagged_fields, array_count) as a small interpreter over the step lists, encoded by skim.py
 * once per (API, direction, version).
 *
 * Bytes in, values out: no I/O, no state but what configure() hands over once at import. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* What the Python side hands over at import (configure_*): classes, tables and the slow paths kept in Python. */
static PyObject *ProtocolError, *Incomplete, *RequestHeader, *ResponseHeader, *FlexibleSince;
static PyObject *WalkFrame;                 /* produce_prefix._walk_frame(buf, size, topics_at, version) */
static PyObject *SkimProgram, *PrefixProgram; /* skim: (program bytes, flexible) of (api, direction, version[, name]) */
static PyObject *SkimPlans, *PrefixPlans;   /* the programs made so far, by their key */
static PyObject *DefaultLimitName;          /* "socket.request.max.bytes" */

#define PRODUCE 0
#define FETCH 1
#define API_VERSIONS 18
#define FETCH_REPLICA_STATE_SINCE 15
#define DEFAULT_MAX_HEADER 65536

/* Every entry point first: an unconfigured module (imported directly, not through accel.py) raises, never crashes. */
#define CONFIGURED(what)                                                                                           \
    if ((what) == NULL) {                                                                                          \
        PyErr_SetString(PyExc_RuntimeError, "proxy.codec._accel is used through proxy.codec.accel");               \
        return NULL;                                                                                               \
    }

/* -- small helpers ------------------------------------------------------------------------------------------ */

static int16_t be16(const unsigned char *p) { return (int16_t)((p[0] << 8) | p[1]); }
static int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}
static int64_t be64(const unsigned char *p) { return (int64_t)(((uint64_t)(uint32_t)be32(p) << 32) | (uint32_t)be32(p + 4)); }

static PyObject *protocol_error(PyObject *message) {
    if (message != NULL) {
        PyErr_SetObject(ProtocolError, message);
        Py_DECREF(message);
    }
    return NULL;
}
#define PE_FORMAT(...) protocol_error(PyUnicode_FromFormat(__VA_ARGS__))

static PyObject *incomplete(void) {
    PyErr_SetNone(Incomplete);
    return NULL;
}

/* A Python int as a long long; past its range, the nearest bound (every comparison here then comes out as the
 * Python one of the unbounded int would). */
static int clamp_ll(PyObject *value, long long *out) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = overflow > 0 ? LLONG_MAX / 4 : overflow < 0 ? LLONG_MIN / 4 : v;
    return 0;
}

/* apis.is_flexible: FLEXIBLE_SINCE[key] <= version, read from the live table. -1 on error. */
static int is_flexible(PyObject *key, long long version) {
    PyObject *since = PyDict_GetItemWithError(FlexibleSince, key);
    if (since == NULL) return PyErr_Occurred() ? -1 : 0;
    if (since == Py_None) return 0;
    long long s;
    if (clamp_ll(since, &s) < 0) return -1;
    return version >= s;
}

static int is_flexible_ll(long long key, long long version) {
    PyObject *k = PyLong_FromLongLong(key);
    if (k == NULL) return -1;
    int flexible = is_flexible(k, version);
    Py_DECREF(k);
    return flexible;
}

/* header.read_uvarint: at most 5 bytes, Incomplete at ``end``. 0 ok, -1 error set. */
static int header_uvarint(const unsigned char *b, int64_t end, int64_t *pos, int64_t *value) {
    int64_t v = 0;
    int shift = 0;
    int64_t p = *pos;
    for (;;) {
        if (p >= end) {
            incomplete();
            return -1;
        }
        unsigned char c = b[p++];
        v |= (int64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) {
            *pos = p;
            *value = v;
            return 0;
        }
        shift += 7;
        if (shift > 28) {
            PyErr_SetString(ProtocolError, "varint longer than 5 bytes");
            return -1;
        }
    }
}

/* header.skip_tagged_fields(buf[:len], pos, limit), the limit only when ``limited``: 0, -1 with the error set, or
 * -2 for HeaderTooLarge(*at_least), which no caller lets out. */
static int skip_tagged(const unsigned char *b, int64_t len, int64_t *pos, int limited, int64_t limit,
                       int64_t *at_least) {
    int64_t count, p = *pos;
    if (header_uvarint(b, len, &p, &count) < 0) return -1;
    if (limited && p + 2 * count > limit) {
        *at_least = p + 2 * count;
        return -2;
    }
    int64_t end = limited && limit < len ? limit : len;
    while (count) {
        if (p + 1 < end && !((b[p] | b[p + 1]) & 0x80)) {
            p += 2 + b[p + 1];
        } else {
            int64_t tag, size;
            if (header_uvarint(b, len, &p, &tag) < 0 || header_uvarint(b, len, &p, &size) < 0) return -1;
            p += size;
        }
        count--;
        if (limited && p > limit) {
            *at_least = p;
            return -2;
        }
    }
    if (p > len) {
        incomplete();
        return -1;
    }
    *pos = p;
    return 0;
}

/* Arguments by position or keyword into out[] (NULL where not given), as a def of ``names`` takes them; -1 with a
 * TypeError. */
static int arguments(const char *const *names, Py_ssize_t required, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames, PyObject **out) {
    Py_ssize_t count = 0;
    while (names[count] != NULL) count++;
    if (nargs > count) {
        PyErr_Format(PyExc_TypeError, "takes at most %zd arguments (%zd given)", count, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) out[i] = i < nargs ? args[i] : NULL;
    Py_ssize_t keywords = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < keywords; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t i = 0;
        while (i < count && PyUnicode_CompareWithASCIIString(name, names[i]) != 0) i++;
        if (i == count || out[i] != NULL) {
            PyErr_Format(PyExc_TypeError, "unexpected or repeated argument %R", name);
            return -1;
        }
        out[i] = args[nargs + k];
    }
    for (Py_ssize_t i = 0; i < required; i++)
        if (out[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "missing argument %s", names[i]);
            return -1;
        }
    return 0;
}

/* -- the request header ------------------------------------------------------------------------------------ */

typedef struct {
    Py_buffer view;
    const unsigned char *b;
    int64_t len;
    int32_t size;
    int16_t api_key, api_version;
    int32_t correlation_id;
    PyObject *client_id; /* a new reference */
    int64_t header_length;
} Header;

static PyObject *limit_text(PyObject *limit_name) { return limit_name ? limit_name : DefaultLimitName; }

/* header.frame_size and request_header_fields on h->b; 0 ok (h->client_id set), -1 with the error set. */
static int read_request_header(Header *h, PyObject *max_size_obj, PyObject *limit_name, PyObject *max_header_obj) {
    const unsigned char *b = h->b;
    int64_t len = h->len;
    long long max_size, max_header = DEFAULT_MAX_HEADER;
    if (clamp_ll(max_size_obj, &max_size) < 0) return -1;
    if (max_header_obj != NULL && clamp_ll(max_header_obj, &max_header) < 0) return -1;
    if (len < 4) return incomplete(), -1;
    int32_t size = be32(b);
    if (size < 0) return PE_FORMAT("negative frame size %d", size), -1;
    if (size > max_size) {
        if (b[0] == 0x16 && b[1] == 0x03 && b[2] <= 0x04) {
            PyErr_SetString(ProtocolError,
                            "a TLS handshake arrived on a plaintext listener (a client configured for SSL? "
                            "give this listener a tls section, or the client the plaintext address)");
            return -1;
        }
        return PE_FORMAT("frame size %d exceeds %S %S", size, limit_text(limit_name), max_size_obj), -1;
    }
    if (size < 10) return PE_FORMAT("request frame of %d bytes is shorter than a request header", size), -1;
    if (len < 14) return incomplete(), -1;
    h->size = size;
    h->api_key = be16(b + 4);
    h->api_version = be16(b + 6);
    h->correlation_id = be32(b + 8);
    int16_t client_id_len = be16(b + 12);
    int64_t pos = 14;
    int64_t frame_end = (int64_t)size + 4;
    PyObject *max_header_text = max_header_obj;
    if (client_id_len >= 0) {
        int64_t end = pos + client_id_len;
        if (end > max_header + 4) {
            if (max_header_text == NULL) max_header_text = PyLong_FromLong(DEFAULT_MAX_HEADER);
            else Py_INCREF(max_header_text);
            if (max_header_text == NULL) return -1;
            PE_FORMAT("request header over request.header.max.bytes %S: a client_id of %d bytes", max_header_text,
                      client_id_len);
            Py_DECREF(max_header_text);
            return -1;
        }
        if (end > frame_end)
            return PE_FORMAT("client_id of %d bytes runs past the %d-byte frame", client_id_len, size), -1;
        if (end > len) return incomplete(), -1;
        PyObject *client_id = PyUnicode_DecodeUTF8((const char *)b + pos, client_id_len, NULL);
        if (client_id == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return -1;
            PyObject *type, *value, *traceback;
            PyErr_Fetch(&type, &value, &traceback);
            PyErr_NormalizeException(&type, &value, &traceback);
            PE_FORMAT("client_id is not UTF-8: %S", value);
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(traceback);
            return -1;
        }
        h->client_id = client_id;
        pos = end;
    } else if (client_id_len != -1) {
        return PE_FORMAT("invalid client_id length %d", client_id_len), -1;
    } else {
        h->client_id = Py_NewRef(Py_None);
    }
    if (h->api_version < 0) {
        Py_CLEAR(h->client_id);
        return PE_FORMAT("negative api_version %d", h->api_version), -1;
    }
    int flexible = is_flexible_ll(h->api_key, h->api_version);
    if (flexible < 0) {
        Py_CLEAR(h->client_id);
        return -1;
    }
    if (flexible) { /* request header v2 (ControlledShutdown v0, header v0, is never flexible) */
        if (pos < frame_end && pos < len && !b[pos] && pos < max_header + 4) {
            pos += 1;
        } else {
            int64_t at_least = 0;
            int64_t within = len < frame_end ? len : frame_end;
            int found = skip_tagged(b, within, &pos, 1, max_header + 4, &at_least);
            if (found == -2) {
                if (max_header_text == NULL) max_header_text = PyLong_FromLong(DEFAULT_MAX_HEADER);
                else Py_INCREF(max_header_text);
                if (max_header_text != NULL) {
                    PE_FORMAT("request header over request.header.max.bytes %S: its tagged fields make it %lld "
                              "bytes at least",
                              max_header_text, (long long)(at_least - 4));
                    Py_DECREF(max_header_text);
                }
            }
            if (found < 0) {
                Py_CLEAR(h->client_id);
                return -1;
            }
        }
    }
    if (pos > frame_end) {
        Py_CLEAR(h->client_id);
        PyErr_SetString(ProtocolError, "request header runs past the end of its frame");
        return -1;
    }
    h->header_length = pos;
    return 0;
}

static int get_buffer(PyObject *buf, Header *h) {
    if (PyObject_GetBuffer(buf, &h->view, PyBUF_SIMPLE) < 0) return -1;
    h->b = (const unsigned char *)h->view.buf;
    h->len = h->view.len;
    h->client_id = NULL;
    return 0;
}

static PyObject *header_tuple(Header *h) {
    return Py_BuildValue("(iiiiNL)", h->size, h->api_key, h->api_version, h->correlation_id, h->client_id,
                         (long long)h->header_length);
}

static PyObject *request_header_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    CONFIGURED(FlexibleSince);
    static const char *const names[] = {"buf", "max_size", "limit_name", "max_header", NULL};
    PyObject *given[4];
    if (arguments(names, 2, args, nargs, kwnames, given) < 0) return NULL;
    PyObject *buf = given[0], *max_size = given[1], *limit_name = given[2], *max_header = given[3];
    Header h;
    if (get_buffer(buf, &h) < 0) return NULL;
    PyObject *result = NULL;
    if (read_request_header(&h, max_size, limit_name, max_header) == 0) result = header_tuple(&h);
    PyBuffer_Release(&h.view);
    return result;
}

/* -- a Produce's prefix (produce_prefix.py) ------------------------------------------------------------------- */

/* _acks_at(buf, size, pos, version): acks and where it ends; -1 with the error set. */
static int acks_at(Header *h, int64_t pos, int *acks, int64_t *after) {
    int64_t frame_end = (int64_t)h->size + 4;
    int64_t avail = h->len < frame_end ? h->len : frame_end;
    const unsigned char *b = h->b;
    if (h->api_version >= 9) {
        int64_t length;
        if (header_uvarint(b, avail, &pos, &length) < 0) return -1;
        pos += length - 1 > 0 ? length - 1 : 0;
    } else if (h->api_version >= 3) {
        if (avail < pos + 2) return incomplete(), -1;
        int16_t length = be16(b + pos);
        if (length < -1) return PE_FORMAT("invalid transactional_id length %d", length), -1;
        pos += 2 + (length > 0 ? length : 0);
    }
    if (pos + 2 > frame_end) {
        PyErr_SetString(ProtocolError, "Produce request ends before its acks field");
        return -1;
    }
    if (avail < pos + 2) return incomplete(), -1;
    *acks = be16(b + pos);
    *after = pos + 2;
    return 0;
}

#define FRAME_ENDS 1 /* _FrameEnds: the frame ends before the field */

/* _need: 0, FRAME_ENDS, or -1 (Incomplete set). */
static int need(int64_t n, int64_t pos, int64_t end, int64_t available) {
    if (pos + n > end) return FRAME_ENDS;
    if (pos + n > available) return incomplete(), -1;
    return 0;
}

/* _length: compact (flexible) or a fixed int16/int32 of ``width`` bytes. */
static int length_at(const unsigned char *b, int64_t *pos, int64_t end, int64_t available, int flexible, int width,
                     int64_t *value) {
    if (flexible) {
        if (*pos >= end) return FRAME_ENDS;
        if (*pos < available && b[*pos] < 0x80) {
            *value = (int64_t)b[*pos] - 1;
            *pos += 1;
            return 0;
        }
        int64_t v;
        if (header_uvarint(b, available, pos, &v) < 0) return -1;
        *value = v - 1;
        return 0;
    }
    int r = need(width, *pos, end, available);
    if (r) return r;
    *value = width == 2 ? be16(b + *pos) : be32(b + *pos);
    *pos += width;
    return 0;
}

/* _read_topics from ``pos`` (after acks): sets pids, only_topic (new references) and topic_count; -1 on error. */
static int read_topics(Header *h, PyObject *buf, int64_t pos, PyObject **pids, PyObject **only_topic,
                       long long *topic_count) {
    const unsigned char *b = h->b;
    int version = h->api_version;
    int64_t end = (int64_t)h->size + 4;
    int64_t available = h->len < end ? h->len : end;
    int flexible = version >= 9;
    int64_t topics, partitions, length, topics_at;
    PyObject *topic = NULL;
    int r;
    *pids = NULL;
    *only_topic = NULL;
    *topic_count = -1;
#define STEP(call)                                                                                                  \
    do {                                                                                                           \
        r = (call);                                                                                                \
        if (r < 0) goto fail;                                                                                      \
        if (r == FRAME_ENDS) goto frame_ends;                                                                      \
    } while (0)
    STEP(need(4, pos, end, available)); /* timeout_ms */
    pos += 4;
    topics_at = pos;
    STEP(length_at(b, &pos, end, available, flexible, 4, &topics));
    *topic_count = topics > 0 ? topics : 0;
    if (topics < 1) goto none;
    if (version >= 13) {
        STEP(need(16, pos, end, available));
        if (topics == 1 && (topic = PyBytes_FromStringAndSize((const char *)b + pos, 16)) == NULL) goto fail;
        pos += 16;
    } else {
        STEP(length_at(b, &pos, end, available, flexible, 2, &length));
        if (length < 0) length = 0;
        STEP(need(length, pos, end, available));
        if (topics == 1) {
            topic = PyUnicode_DecodeUTF8((const char *)b + pos, length, NULL);
            if (topic == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) goto fail;
                PyErr_Clear();
                topic = Py_NewRef(Py_None);
            }
        }
        pos += length;
    }
    if (topics == 1) *only_topic = topic; /* the reference moves */
    topic = NULL;
    STEP(length_at(b, &pos, end, available, flexible, 4, &partitions));
    if (partitions < 1 && topics == 1) goto none;
    if (topics == 1 && partitions == 1) {
        STEP(need(4, pos, end, available)); /* index */
        pos += 4;
        STEP(length_at(b, &pos, end, available, flexible, 4, &length)); /* records */
        if (length < 12) goto none;
        STEP(need(12, pos, end, available));
        if ((int64_t)be32(b + pos + 8) + 12 == length) { /* one batch: its header is enough */
            if (length < 12 + 49) goto none;
            STEP(need(43 + 8, pos, end, available));
            if (b[pos + 16] != 2) goto none;
            int64_t pid = be64(b + pos + 43);
            *pids = pid >= 0 ? Py_BuildValue("(L)", (long long)pid) : PyTuple_New(0);
            if (*pids == NULL) goto fail;
            goto done;
        }
    }
    if (available < end) { /* several partitions or batches: none of it moves before every batch is read */
        incomplete();
        goto fail;
    }
    *pids = PyObject_CallFunction(WalkFrame, "OiLi", buf, h->size, (long long)topics_at, version);
    if (*pids == NULL) goto fail;
    goto done;
frame_ends:
none:
    *pids = PyTuple_New(0);
    if (*pids == NULL) goto fail;
done:
    if (*only_topic == NULL) *only_topic = Py_NewRef(Py_None);
    return 0;
fail:
    Py_XDECREF(topic);
    Py_CLEAR(*only_topic);
    Py_CLEAR(*pids);
    return -1;
#undef STEP
}

static PyObject *make_header(Header *h, PyObject *acks, PyObject *pids, PyObject *only_topic, long long topic_count,
                             long long replica_id) {
    PyObject *args[12];
    Py_ssize_t n = 6;
    args[0] = PyLong_FromLong(h->size);
    args[1] = PyLong_FromLong(h->api_key);
    args[2] = PyLong_FromLong(h->api_version);
    args[3] = PyLong_FromLong(h->correlation_id);
    args[4] = h->client_id;
    args[5] = PyLong_FromLongLong(h->header_length);
    int owned[12] = {1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 1, 1};
    if (acks != NULL) { /* Produce */
        args[6] = acks;
        n = 7;
        if (pids != NULL) {
            args[7] = pids;
            args[8] = only_topic;
            args[9] = Py_False;
            args[10] = PyLong_FromLongLong(topic_count);
            n = 11;
        }
    } else if (replica_id >= 0) { /* a follower's Fetch v0-14 */
        args[6] = Py_None;
        args[7] = PyTuple_New(0);
        owned[7] = 1;
        args[8] = Py_None;
        args[9] = Py_False;
        args[10] = PyLong_FromLong(-1);
        args[11] = PyLong_FromLongLong(replica_id);
        n = 12;
    }
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        if (args[i] == NULL) goto out;
    result = PyObject_Vectorcall(RequestHeader, args, n, NULL);
out:
    for (Py_ssize_t i = 0; i < n; i++)
        if (owned[i]) Py_XDECREF(args[i]);
    return result;
}

static PyObject *parse_request_prefix(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    CONFIGURED(WalkFrame);
    static const char *const names[] = {"buf", "max_size", "read_produce_prefix", "limit_name", "max_header", NULL};
    PyObject *given[5];
    if (arguments(names, 2, args, nargs, kwnames, given) < 0) return NULL;
    PyObject *buf = given[0], *max_size = given[1], *read_prefix = given[2], *limit_name = given[3];
    PyObject *max_header = given[4];
    Header h;
    if (get_buffer(buf, &h) < 0) return NULL;
    PyObject *result = NULL;
    if (read_request_header(&h, max_size, limit_name, max_header) < 0) goto out;
    if (h.api_key == PRODUCE) {
        int acks;
        int64_t after;
        if (acks_at(&h, h.header_length, &acks, &after) < 0) goto out;
        PyObject *acks_obj = PyLong_FromLong(acks);
        if (acks_obj == NULL) goto out;
        int wanted = read_prefix == NULL ? 0 : PyObject_IsTrue(read_prefix);
        if (wanted < 0) {
            Py_DECREF(acks_obj);
            goto out;
        }
        if (wanted) {
            PyObject *pids, *only_topic;
            long long topic_count;
            if (read_topics(&h, buf, after, &pids, &only_topic, &topic_count) == 0) {
                result = make_header(&h, acks_obj, pids, only_topic, topic_count, -1);
                Py_DECREF(pids);
                Py_DECREF(only_topic);
            }
        } else {
            result = make_header(&h, acks_obj, NULL, NULL, -1, -1);
        }
        Py_DECREF(acks_obj);
        goto out;
    }
    long long replica_id = -1;
    if (h.api_key == FETCH && h.api_version < FETCH_REPLICA_STATE_SINCE) { /* fetch_prefix.fetch_replica_id */
        int64_t pos = h.header_length;
        if (pos + 4 <= (int64_t)h.size + 4) {
            if (pos + 4 > h.len) {
                incomplete();
                goto out;
            }
            replica_id = be32(h.b + pos);
        }
    }
    result = make_header(&h, NULL, NULL, NULL, -1, replica_id);
out:
    Py_XDECREF(h.client_id);
    PyBuffer_Release(&h.view);
    return result;
}

/* -- responses (header.py) ---------------------------------------------------------------------------------- */

static PyObject *parse_response_prefix(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    CONFIGURED(ResponseHeader);
    static const char *const names[] = {"buf", "max_size", NULL};
    PyObject *given[2];
    if (arguments(names, 1, args, nargs, kwnames, given) < 0) return NULL;
    PyObject *buf = given[0], *max_size_obj = given[1];
    long long max_size = 2147483647LL;
    if (max_size_obj != NULL && clamp_ll(max_size_obj, &max_size) < 0) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *b = view.buf;
    PyObject *result = NULL;
    if (view.len < 4) {
        incomplete();
        goto out;
    }
    int32_t size = be32(b);
    if (size < 4) {
        PE_FORMAT("response frame of %d bytes is shorter than a response header", size);
        goto out;
    }
    if (size > max_size) {
        PyObject *text = max_size_obj ? Py_NewRef(max_size_obj) : PyLong_FromLongLong(max_size);
        if (text != NULL) {
            PE_FORMAT("response frame size %d exceeds upstream.response.max.bytes %S", size, text);
            Py_DECREF(text);
        }
        goto out;
    }
    if (view.len < 8) {
        incomplete();
        goto out;
    }
    PyObject *fields[2] = {PyLong_FromLong(size), PyLong_FromLong(be32(b + 4))};
    if (fields[0] != NULL && fields[1] != NULL) result = PyObject_Vectorcall(ResponseHeader, fields, 2, NULL);
    Py_XDECREF(fields[0]);
    Py_XDECREF(fields[1]);
out:
    PyBuffer_Release(&view);
    return result;
}

static PyObject *response_header_length(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    CONFIGURED(FlexibleSince);
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "response_header_length takes 3 arguments");
        return NULL;
    }
    long long key, version;
    if (clamp_ll(args[0], &key) < 0 || clamp_ll(args[1], &version) < 0) return NULL;
    int flexible = key == API_VERSIONS ? 0 : is_flexible(args[0], version);
    if (flexible < 0) return NULL;
    if (!flexible) return PyLong_FromLong(8);
    Py_buffer view;
    if (PyObject_GetBuffer(args[2], &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *b = view.buf;
    PyObject *result = NULL;
    if (view.len > 8 && !b[8]) {
        result = PyLong_FromLong(9);
    } else {
        int64_t pos = 8, at_least;
        if (skip_tagged(b, view.len, &pos, 0, 0, &at_least) == 0) {
            result = PyLong_FromLongLong(pos);
        } else if (PyErr_ExceptionMatches(Incomplete)) {
            PyErr_Clear();
            PyErr_SetString(ProtocolError, "response header tagged fields run past the frame");
        }
    }
    PyBuffer_Release(&view);
    return result;
}

/* -- the skimmers (skim.py) ---------------------------------------------------------------------------------- */

/* The program's operations, as skim._encode writes them (int32 each, an operation and its argument). */
enum { OP_RUN, OP_VARIABLE, OP_TAGS, OP_ARRAY_FIXED, OP_ARRAY, OP_ARRAY_CALL, OP_NULLABLE };
#define SHORT 1 /* IndexError, struct.error or Incomplete in the Python skipper: the body ends inside a field */

typedef struct {
    const unsigned char *b;
    int64_t len;
    int flexible;
} Body;

/* primitives.read_uvarint: a 32-bit value in at most 5 bytes; its ProtocolErrors. */
static int prim_uvarint(const unsigned char *b, int64_t len, int64_t *pos, int64_t *value) {
    int64_t p = *pos;
    if (p >= len) return PE_FORMAT("truncated varint at offset %lld", (long long)p), -1;
    unsigned char c = b[p];
    if (c < 0x80) {
        *value = c;
        *pos = p + 1;
        return 0;
    }
    int64_t v = c & 0x7F;
    int shift = 7;
    p += 1;
    for (;;) {
        if (shift > 28) return PE_FORMAT("varint longer than 5 bytes at offset %lld", (long long)p), -1;
        if (p >= len) return PE_FORMAT("truncated varint at offset %lld", (long long)p), -1;
        c = b[p++];
        v |= (int64_t)(c & 0x7F) << shift;
        if (c < 0x80) {
            if (v > 0xFFFFFFFFLL) {
                PyErr_SetString(ProtocolError, "varint exceeds 32 bits");
                return -1;
            }
            *value = v;
            *pos = p;
            return 0;
        }
        shift += 7;
    }
}

/* The generated skipper's length or count at pos (``width`` bytes when not flexible): 0, SHORT or -1. */
static int skim_length(Body *c, int64_t *pos, int width, int64_t *n) {
    if (c->flexible) {
        if (*pos >= c->len) return SHORT;
        int64_t v = (int64_t)c->b[*pos] - 1;
        if (v < 127) {
            *pos += 1;
            *n = v;
            return 0;
        }
        if (prim_uvarint(c->b, c->len, pos, &v) < 0) return -1;
        *n = v - 1;
        return 0;
    }
    if (*pos + width > c->len) return SHORT;
    *n = width == 2 ? be16(c->b + *pos) : be32(c->b + *pos);
    *pos += width;
    return 0;
}

static int skim(Body *c, const int32_t *op, const int32_t *stop, int64_t *pos) {
    int64_t n;
    int r;
    while (op < stop) {
        int32_t what = op[0], argument = op[1];
        op += 2;
        switch (what) {
        case OP_RUN:
            *pos += argument;
            break;
        case OP_VARIABLE:
            if ((r = skim_length(c, pos, argument, &n))) return r;
            if (n > 0)
                *pos += n;
            else if (n < -1)
                return PyErr_SetString(ProtocolError, "invalid length"), -1;
            break;
        case OP_TAGS:
            if (*pos >= c->len) return SHORT;
            if (c->b[*pos]) {
                int64_t at_least;
                if (skip_tagged(c->b, c->len, pos, 0, 0, &at_least) < 0) {
                    if (!PyErr_ExceptionMatches(Incomplete)) return -1;
                    PyErr_Clear();
                    return SHORT;
                }
            } else {
                *pos += 1;
            }
            break;
        case OP_NULLABLE:
            *pos += 1;
            if (*pos - 1 >= c->len) return SHORT;
            if (c->b[*pos - 1] < 128 && (r = skim(c, op, op + argument, pos))) return r;
            op += argument;
            break;
        default: /* the arrays */
            if ((r = skim_length(c, pos, 4, &n))) return r;
            if (n > 0) {
                if (n > c->len - *pos) return PyErr_SetString(ProtocolError, "array too long"), -1;
                if (what == OP_ARRAY_FIXED) {
                    *pos += n * argument;
                } else {
                    for (int64_t i = 0; i < n; i++) {
                        if ((r = skim(c, op, op + argument, pos))) return r;
                        if (what == OP_ARRAY_CALL && *pos > c->len)
                            return PyErr_SetString(ProtocolError, "fields run past the end"), -1;
                    }
                }
            } else if (n < -1) {
                return PyErr_SetString(ProtocolError, "invalid array length"), -1;
            }
            if (what != OP_ARRAY_FIXED) op += argument;
        }
    }
    return 0;
}

/* The program of a key, made by ``factory`` on the first call and kept in ``plans``: a borrowed (bytes, flexible). */
static PyObject *program(PyObject *plans, PyObject *factory, PyObject *key) {
    PyObject *plan = PyDict_GetItemWithError(plans, key);
    if (plan != NULL || PyErr_Occurred()) return plan;
    plan = PyObject_Call(factory, key, NULL);
    if (plan == NULL) return NULL;
    if (!PyTuple_Check(plan) || PyTuple_GET_SIZE(plan) != 2 || !PyBytes_Check(PyTuple_GET_ITEM(plan, 0))) {
        Py_DECREF(plan);
        PyErr_SetString(PyExc_TypeError, "a skim program is (bytes, flexible)");
        return NULL;
    }
    int stored = PyDict_SetItem(plans, key, plan);
    Py_DECREF(plan);
    return stored < 0 ? NULL : plan; /* the dict holds it */
}

/* Runs the plan's top-level skipper on body: 0 and *pos, SHORT, or -1 (error set). */
static int run_plan(PyObject *plan, Body *c, int64_t *pos) {
    PyObject *code = PyTuple_GET_ITEM(plan, 0);
    c->flexible = PyObject_IsTrue(PyTuple_GET_ITEM(plan, 1));
    const int32_t *op = (const int32_t *)PyBytes_AS_STRING(code);
    *pos = 0;
    int r = skim(c, op, op + PyBytes_GET_SIZE(code) / 4, pos);
    if (r) return r;
    if (*pos > c->len) return PyErr_SetString(ProtocolError, "fields run past the end"), -1;
    return 0;
}

static PyObject *tagged_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    CONFIGURED(SkimProgram);
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "tagged_fields takes 4 arguments");
        return NULL;
    }
    PyObject *key = PyTuple_Pack(3, args[0], args[1], args[2]);
    if (key == NULL) return NULL;
    PyObject *plan = program(SkimPlans, SkimProgram, key);
    Py_DECREF(key);
    if (plan == NULL) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[3], &view, PyBUF_SIMPLE) < 0) return NULL;
    Body c = {view.buf, view.len, 0};
    int64_t pos, end = view.len;
    PyObject *found = PyDict_New();
    int r = found == NULL ? -1 : run_plan(plan, &c, &pos);
    if (r == 0 && c.flexible) {
        if (pos < end && !c.b[pos]) {
            pos += 1;
        } else {
            int64_t count;
            if (prim_uvarint(c.b, end, &pos, &count) < 0) {
                r = -1;
            } else if (count > end - pos) {
                PE_FORMAT("%lld tagged fields in the %lld bytes left", (long long)count, (long long)(end - pos));
                r = -1;
            }
            for (int64_t i = 0; r == 0 && i < count; i++) {
                int64_t tag, size;
                if (prim_uvarint(c.b, end, &pos, &tag) < 0 || prim_uvarint(c.b, end, &pos, &size) < 0) {
                    r = -1;
                    break;
                }
                PyObject *k = PyLong_FromLongLong(tag), *span = Py_BuildValue("(LL)", (long long)pos,
                                                                              (long long)(pos + size));
                if (k == NULL || span == NULL || PyDict_SetItem(found, k, span) < 0) r = -1;
                Py_XDECREF(k);
                Py_XDECREF(span);
                pos += size;
                if (r == 0 && pos > end) {
                    PE_FORMAT("tagged field %lld of %lld bytes runs past the end (%lld)", (long long)tag,
                              (long long)size, (long long)end);
                    r = -1;
                }
            }
        }
    }
    PyBuffer_Release(&view);
    if (r == SHORT) PE_FORMAT("%S %S v%S ends inside a field", args[1], args[0], args[2]);
    else if (r == 0 && pos != end)
        PE_FORMAT("%S %S v%S: %lld bytes left after its fields", args[1], args[0], args[2], (long long)(end - pos));
    else if (r == 0)
        return found;
    Py_XDECREF(found);
    return NULL;
}

static PyObject *array_count(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    CONFIGURED(PrefixProgram);
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "array_count takes 5 arguments");
        return NULL;
    }
    PyObject *key = PyTuple_Pack(4, args[0], args[1], args[2], args[3]);
    if (key == NULL) return NULL;
    PyObject *plan = program(PrefixPlans, PrefixProgram, key);
    Py_DECREF(key);
    if (plan == NULL) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[4], &view, PyBUF_SIMPLE) < 0) return NULL;
    Body c = {view.buf, view.len, 0};
    int64_t pos, count = 0;
    int r = run_plan(plan, &c, &pos);
    if (r == 0) {
        if (c.flexible) {
            if (prim_uvarint(c.b, c.len, &pos, &count) < 0) r = -1;
            count -= 1;
        } else if (pos + 4 > c.len) {
            r = SHORT;
        } else {
            count = be32(c.b + pos);
        }
    }
    PyBuffer_Release(&view);
    if (r == SHORT) return PE_FORMAT("%S %S v%S ends before its %S", args[1], args[0], args[2], args[3]);
    return r ? NULL : PyLong_FromLongLong(count);
}

/* -- set-up -------------------------------------------------------------------------------------------------- */

static void store(PyObject **slot, PyObject *value) {
    PyObject *old = *slot;
    Py_XINCREF(value);
    *slot = value;
    Py_XDECREF(old);
}

static PyObject *configure_header(PyObject *self, PyObject *args) {
    PyObject *pe, *inc, *req, *resp, *flex;
    if (!PyArg_ParseTuple(args, "OOOOO!", &pe, &inc, &req, &resp, &PyDict_Type, &flex)) return NULL;
    store(&ProtocolError, pe);
    store(&Incomplete, inc);
    store(&RequestHeader, req);
    store(&ResponseHeader, resp);
    store(&FlexibleSince, flex);
    Py_RETURN_NONE;
}

static PyObject *configure_produce(PyObject *self, PyObject *walk) {
    store(&WalkFrame, walk);
    Py_RETURN_NONE;
}

static PyObject *configure_skim(PyObject *self, PyObject *args) {
    PyObject *skim_program, *prefix_program;
    if (!PyArg_ParseTuple(args, "OO", &skim_program, &prefix_program)) return NULL;
    store(&SkimProgram, skim_program);
    store(&PrefixProgram, prefix_program);
    PyDict_Clear(SkimPlans);
    PyDict_Clear(PrefixPlans);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"request_header_fields", (PyCFunction)(void (*)(void))request_header_fields, METH_FASTCALL | METH_KEYWORDS,
     "header.request_header_fields in C"},
    {"parse_request_prefix", (PyCFunction)(void (*)(void))parse_request_prefix, METH_FASTCALL | METH_KEYWORDS,
     "produce_prefix.parse_request_prefix in C"},
    {"parse_response_prefix", (PyCFunction)(void (*)(void))parse_response_prefix, METH_FASTCALL | METH_KEYWORDS,
     "header.parse_response_prefix in C"},
    {"response_header_length", (PyCFunction)(void (*)(void))response_header_length, METH_FASTCALL,
     "header.response_header_length in C"},
    {"tagged_fields", (PyCFunction)(void (*)(void))tagged_fields, METH_FASTCALL, "skim.tagged_fields in C"},
    {"array_count", (PyCFunction)(void (*)(void))array_count, METH_FASTCALL, "skim.array_count in C"},
    {"configure_header", configure_header, METH_VARARGS, "the classes and the flexible-version table"},
    {"configure_produce", configure_produce, METH_O, "the walk of a Produce of several partitions or batches"},
    {"configure_skim", configure_skim, METH_VARARGS, "the makers of the skimmers' programs"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_accel", "The codec's hot path in C.", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__accel(void) {
    SkimPlans = PyDict_New();
    PrefixPlans = PyDict_New();
    DefaultLimitName = PyUnicode_InternFromString("socket.request.max.bytes");
    if (SkimPlans == NULL || PrefixPlans == NULL || DefaultLimitName == NULL) return NULL;
    return PyModule_Create(&module);
}
