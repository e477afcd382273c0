/* produce_prefix.py in C: parse_request_prefix (_acks_at, _read_topics; a request that is not one partition of one
 * batch is walked by the Python _walk) and, for a Fetch v0-14, fetch_prefix.fetch_replica_id. */

#include "accel.h"

static PyObject *TopicNames[RECENT_TEXTS]; /* the only topics of Produce requests read lately (recent_text) */

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
            topic = recent_text(TopicNames, b + pos, (Py_ssize_t)length);
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

/* RequestHeader(*fields, acks, producer_ids, only_topic, topic_count=...) or, for a follower's Fetch, with its
 * replica_id: every field given, the dataclass's defaults for those not read (None, (), None, False, -1, -1). */
static PyObject *make_header(Header *h, PyObject *acks, PyObject *pids, PyObject *only_topic, long long topic_count,
                             long long replica_id) {
    PyObject *values[12] = {
        PyLong_FromLong(h->size),
        PyLong_FromLong(h->api_key),
        PyLong_FromLong(h->api_version),
        PyLong_FromLong(h->correlation_id),
        Py_NewRef(h->client_id),
        PyLong_FromLongLong(h->header_length),
        Py_NewRef(acks ? acks : Py_None),
        pids ? Py_NewRef(pids) : PyTuple_New(0),
        Py_NewRef(only_topic ? only_topic : Py_None),
        Py_NewRef(Py_False),
        PyLong_FromLongLong(topic_count),
        PyLong_FromLongLong(replica_id >= 0 ? replica_id : -1), /* a consumer's (any negative id): the default */
    };
    PyObject *result = NULL;
    int complete = 1;
    for (int i = 0; i < 12; i++) complete &= values[i] != NULL;
    if (complete) result = new_slotted(RequestHeader, &RequestSlots, values, 12);
    for (int i = 0; i < 12; i++) Py_XDECREF(values[i]);
    return result;
}

PyObject *parse_request_prefix(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
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
