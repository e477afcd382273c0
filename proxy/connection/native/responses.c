/* The response path's per-response methods and the broker side's event loop: proxy.connection.response_frames'
 * PureResponses in C, answering the same at every step (tests/proxy/connection/test_responses_native.py runs one
 * connection core on each through the same streams and compares everything either side got). response_path.py
 * makes its ResponsePath a class over Responses (adding what a buffered response, a local answer and a throttle need:
 * Python for both); each method below mirrors the pure one of the same name. */

#include "connection.h"

typedef struct {
    PyObject_HEAD
    PyObject *flow;        /* the connection's flow */
    Queue *queue;          /* the flow's in-flight queue */
    PyObject *write;       /* writes a whole frame or a streamed segment to the client */
    PyObject *clock;       /* the connection's clock: ns */
    PyObject *api_metrics; /* api_key -> its metrics (answered(nbytes, seconds)) */
    PyObject *usage;       /* the usage log's recorder */
    PyObject *session;     /* whose SASL exchange raw token responses belong to */
    PyObject *account;     /* records what a response leg accounted for */
    Entry *current;        /* the request whose response is being received, or NULL */
    Py_ssize_t sent;       /* the size of the response frame being received, as the client gets it */
    long long dropping_since_ns;
} Responses;

/* _answered: the one place a response is accounted, once its nbytes are handed to the client. */
static int answered(Responses *self, Entry *entry, Py_ssize_t nbytes) {
    PyObject *request = entry->header;
    PyObject *size = PyLong_FromSsize_t(nbytes);
    if (size == NULL) return -1;
    if (self->usage != NoUsageRecorder) { /* a call that does nothing, without a usage log */
        if (done(call_method(ResponseName, self->usage, request, size, NULL, 3)) < 0) goto fail;
    }
    PyObject *api_key = GETATTR(request, ApiKeyName);
    if (api_key == NULL) goto fail;
    PyObject *metrics = PyObject_CallOneArg(self->api_metrics, api_key);
    Py_DECREF(api_key);
    if (metrics == NULL) goto fail;
    long long now;
    if (clock_ns(self->clock, &now) < 0) {
        Py_DECREF(metrics);
        goto fail;
    }
    PyObject *seconds = PyFloat_FromDouble((double)(now - entry->received_ns) / 1e9);
    if (seconds == NULL) {
        Py_DECREF(metrics);
        goto fail;
    }
    int failed = count_answered(metrics, size, seconds);
    Py_DECREF(seconds);
    Py_DECREF(metrics);
    Py_DECREF(size);
    return failed;
fail:
    Py_DECREF(size);
    return -1;
}

static PyObject *answered_method(Responses *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "_answered() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (as_entry(args[0]) < 0) return NULL;
    Py_ssize_t nbytes = PyLong_AsSsize_t(args[1]);
    if (nbytes == -1 && PyErr_Occurred()) return NULL;
    if (answered(self, (Entry *)args[0], nbytes) < 0) return NULL;
    Py_RETURN_NONE;
}

/* header: stream the response, buffer it (its request's leg or throttle needs the whole), or drop it. */
static PyObject *header_of(Responses *self, PyObject *header) {
    PyObject *raw = GETATTR(header, RawName);
    if (raw == NULL) return NULL;
    int is_raw = PyObject_IsTrue(raw);
    Py_DECREF(raw);
    if (is_raw < 0) return NULL;
    if (is_raw) { /* a raw SASL token from the broker: it answers the client's raw token, no correlation id */
        Py_CLEAR(self->current);
        return Py_NewRef(ActBuffer);
    }
    long long correlation_id, size;
    if (long_attr(header, CorrelationIdName, &correlation_id) < 0) return NULL;
    PyObject *found = queue_match(self->queue, correlation_id);
    if (found == NULL) return NULL;
    if (found == Py_None) {
        Py_DECREF(found);
        long long now;
        if (clock_ns(self->clock, &now) < 0) return NULL;
        self->dropping_since_ns = now; /* the response timeout covers it to its last byte too */
        return Py_NewRef(ActDrop);
    }
    Entry *entry = (Entry *)found;
    Py_XSETREF(self->current, entry);
    if (entry->leg != NoLeg || entry->throttle != Py_None) return Py_NewRef(ActBuffer);
    if (long_attr(header, SizeName, &size) < 0) return NULL;
    self->sent = (Py_ssize_t)size + 4;
    return Py_NewRef(ActStream);
}

static PyObject *header_method(Responses *self, PyObject *header) {
    CONFIGURED
    return header_of(self, header);
}

/* ended: the response's last byte is out (or dropped): accounted, and the answers waiting behind it go. */
static int ended(Responses *self) {
    Entry *entry = self->current;
    self->dropping_since_ns = 0;
    if (entry != NULL) {
        self->current = NULL; /* its reference is ours now */
        int answer = entry->leg == NoLeg;
        if (!answer) {
            PyObject *lookup = GETATTR(entry->leg, LookupName);
            if (lookup == NULL) {
                Py_DECREF(entry);
                return -1;
            }
            answer = lookup == Py_None;
            Py_DECREF(lookup);
        }
        int failed = answer && answered(self, entry, self->sent) < 0;
        Py_DECREF(entry);
        if (failed) return -1;
    }
    if (self->queue->local_answers) { /* a dropped response (acks=0, the probe) may have been all one waited for */
        if (done(call_method(SendReadyLocalName, (PyObject *)self, NULL, NULL, NULL, 1)) < 0) return -1;
    }
    return 0;
}

static PyObject *ended_method(Responses *self, PyObject *unused) {
    CONFIGURED
    if (ended(self) < 0) return NULL;
    Py_RETURN_NONE;
}

/* What frame() reads of a buffered response first: its request's api_key and version, its header's length (the
 * number and its value) and the body after it (a view of the frame; a glance's, a view over its exported bytes). */
typedef struct {
    PyObject *api_key, *version, *length, *body;
    Py_ssize_t header_length;
    Py_buffer held; /* a glance's frame, exported while its body is looked at (held.obj NULL otherwise) */
} Parts;

static void parts_release(Parts *parts) { /* the body released here: the frame's export with it */
    if (parts->held.obj != NULL) { /* a glance: its body must not outlive the export it points into */
        if (parts->body != NULL && Py_REFCNT(parts->body) > 1) {
            PyObject *released = PyObject_CallMethod(parts->body, "release", NULL);
            if (released == NULL) PyErr_WriteUnraisable(parts->body); /* (never: the view exports nothing) */
            Py_XDECREF(released);
        }
        Py_CLEAR(parts->body);
        PyBuffer_Release(&parts->held);
    }
    Py_CLEAR(parts->body);
    Py_CLEAR(parts->length);
    Py_CLEAR(parts->version);
    Py_CLEAR(parts->api_key);
}

/* 0, or -1 with an error set and nothing held */
static int parts_of(PyObject *request, PyObject *frame, Parts *parts, int glance) {
    *parts = (Parts){0};
    if ((parts->api_key = GETATTR(request, ApiKeyName)) == NULL) goto failed;
    if ((parts->version = GETATTR(request, ApiVersionName)) == NULL) goto failed;
    PyObject *length_args[] = {parts->api_key, parts->version, frame};
    if ((parts->length = PyObject_Vectorcall(ResponseHeaderLength, length_args, 3, NULL)) == NULL) goto failed;
    parts->header_length = PyLong_AsSsize_t(parts->length);
    if (parts->header_length == -1 && PyErr_Occurred()) goto failed;
    if (glance) { /* one read-only view straight over the frame's bytes, not a view of it and its slice */
        if (PyObject_GetBuffer(frame, &parts->held, PyBUF_SIMPLE) < 0) goto failed;
        Py_ssize_t start = parts->header_length, len = parts->held.len;
        start = start < 0 ? 0 : start > len ? len : start; /* as the slice clamps it */
        parts->body = PyMemoryView_FromMemory((char *)parts->held.buf + start, len - start, PyBUF_READ);
    } else {
        parts->body = view_from(frame, parts->header_length);
    }
    if (parts->body == NULL) goto failed;
    return 0;
failed:
    parts_release(parts);
    return -1;
}

/* A buffered response whose request's leg is a rewrite alone that keeps the broker's body (it lacks the tag the
 * rewrite looks for: ResponseLeg.unless_tagged) and no throttle: written as it is, as the pure frame() does for it,
 * without calling it. 1 if written, 0 if frame() is to run, -1 on an error (frame()'s own for these bytes). */
static int kept_whole(Responses *self, PyObject *frame) {
    Entry *entry = self->current;
    if (entry == NULL || entry->throttle != Py_None || entry->leg == NoLeg) return 0;
    PyObject *alone = GETATTR(entry->leg, RewriteAloneName);
    if (alone == NULL) return -1;
    int rewrite_alone = PyObject_IsTrue(alone);
    Py_DECREF(alone);
    if (rewrite_alone <= 0) return rewrite_alone;
    PyObject *tag = GETATTR(entry->leg, UnlessTaggedName);
    if (tag == NULL) return -1;
    if (tag == Py_None) {
        Py_DECREF(tag);
        return 0;
    }
    Parts parts;
    PyObject *tags = NULL;
    int result = -1;
    if (parts_of(entry->header, frame, &parts, 1) < 0) {
        Py_DECREF(tag);
        return -1;
    }
    PyObject *tag_args[] = {parts.api_key, ResponseText, parts.version, parts.body};
    if ((tags = PyObject_Vectorcall(TaggedFields, tag_args, 4, NULL)) == NULL) goto done;
    int moved = PySequence_Contains(tags, tag);
    if (moved != 0) {
        result = moved < 0 ? -1 : 0;
        goto done;
    }
    Py_ssize_t size = PyObject_Length(frame);
    if (size < 0) goto done;
    self->sent = size;
    PyObject *written = PyObject_CallOneArg(self->write, frame);
    if (written == NULL) goto done;
    Py_DECREF(written);
    result = 1;
done:
    Py_DECREF(tag);
    Py_XDECREF(tags);
    parts_release(&parts);
    return result;
}

/* a leg attribute's value (its reference taken) that must be None for the charged path: 1 if it is, 0 if not, -1 on
 * an error (NULL) */
static inline int none_of(PyObject *value) {
    if (value == NULL) return -1;
    Py_DECREF(value);
    return value == Py_None;
}

/* ValueError from a leg's rewrite or charge: the ProtocolError the Python raises (_unwritable), from None */
static void unwritable(PyObject *request) {
    if (!PyErr_ExceptionMatches(PyExc_ValueError)) return;
    PyObject *type, *exc, *traceback;
    PyErr_Fetch(&type, &exc, &traceback);
    PyErr_NormalizeException(&type, &exc, &traceback);
    Py_XDECREF(type);
    Py_XDECREF(traceback);
    PyObject *api_key = GETATTR(request, ApiKeyName);
    PyObject *version = api_key == NULL ? NULL : GETATTR(request, ApiVersionName);
    PyObject *text = version == NULL ? NULL : PyUnicode_FromFormat("cannot rewrite %S v%S response: %S", api_key, version, exc);
    Py_XDECREF(api_key);
    Py_XDECREF(version);
    Py_XDECREF(exc);
    if (text == NULL) return;
    PyObject *error = PyObject_CallOneArg(ProtocolError, text);
    Py_DECREF(text);
    if (error == NULL) return;
    PyException_SetCause(error, NULL);
    PyErr_SetObject((PyObject *)Py_TYPE(error), error);
    Py_DECREF(error);
}

/* A buffered response whose request's leg only rewrites and charges (no observer, settlement, accounting or lookup:
 * a consumer Fetch under a byte-rate quota, with cluster mode's node endpoints) and no throttle: run as frame() and
 * ResponseLeg.run run it: rewritten, charged on the size the client gets, then, when the charge is a plain forward,
 * written (the rest, from the charge on, is _charged's). 1 if done, 0 if frame() is to run, -1 on an error. */
static int charged_whole(Responses *self, PyObject *header, PyObject *frame) {
    Entry *entry = self->current;
    if (entry == NULL || entry->throttle != Py_None || entry->leg == NoLeg) return 0;
    PyObject *leg = entry->leg;
    PyObject *raw = GETATTR(header, RawName);
    if (raw == NULL) return -1;
    int is_raw = PyObject_IsTrue(raw);
    Py_DECREF(raw);
    if (is_raw) return is_raw < 0 ? -1 : 0;
    int none; /* each read its own call site (GETATTR's cache) */
    if ((none = none_of(GETATTR(leg, LookupName))) <= 0 || (none = none_of(GETATTR(leg, ObserveName))) <= 0 ||
        (none = none_of(GETATTR(leg, SettleName))) <= 0 || (none = none_of(GETATTR(leg, AccountedName))) <= 0)
        return none;
    PyObject *record = GETATTR(leg, RecordResponseName);
    if (record == NULL) return -1;
    if (record == Py_None) {
        Py_DECREF(record);
        return 0;
    }
    Py_INCREF(entry);
    Py_INCREF(leg);
    PyObject *request = entry->header, *rewrite = NULL, *rewritten = NULL, *decision = NULL, *answer = NULL;
    int result = -1;
    Parts parts;
    if (parts_of(request, frame, &parts, 0) < 0) {
        Py_DECREF(record);
        Py_DECREF(leg);
        Py_DECREF(entry);
        return -1;
    }
    PyObject *body = parts.body, *length = parts.length;
    Py_ssize_t header_length = parts.header_length;
    Py_ssize_t frame_size = PyObject_Length(frame);
    if (frame_size < 0) goto done;
    if ((rewrite = GETATTR(leg, RewriteName)) == NULL) goto done;
    rewritten = rewrite == Py_None ? Py_NewRef(Py_None) : PyObject_CallOneArg(rewrite, body);
    if (rewritten == NULL) {
        unwritable(request);
        goto done;
    }
    Py_buffer kept = {0};
    if (rewritten != Py_None && PyObject_GetBuffer(rewritten, &kept, PyBUF_SIMPLE) < 0) goto done;
    Py_ssize_t size = rewritten == Py_None ? frame_size - 4 : header_length - 4 + kept.len;
    PyObject *nbytes = PyLong_FromSsize_t(size);
    decision = nbytes == NULL ? NULL : PyObject_CallOneArg(record, nbytes);
    Py_XDECREF(nbytes);
    if (decision == NULL) {
        if (rewritten != Py_None) PyBuffer_Release(&kept);
        unwritable(request);
        goto done;
    }
    if (decision != ForwardDecision) { /* a throttle (or a shadow one): the rest is the Python's */
        if (rewritten != Py_None) PyBuffer_Release(&kept);
        PyObject *args[] = {(PyObject *)self, (PyObject *)entry, frame, length, body, rewritten, decision};
        result = done(PyObject_VectorcallMethod(ChargedName, args, 7 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL));
        if (result == 0) result = 1;
        goto done;
    }
    if (rewritten == Py_None) {
        answer = Py_NewRef(frame);
    } else { /* the size, the broker's header, the new body: _send_answer's frame */
        Py_buffer whole;
        if (PyObject_GetBuffer(frame, &whole, PyBUF_SIMPLE) < 0) {
            PyBuffer_Release(&kept);
            goto done;
        }
        answer = PyBytes_FromStringAndSize(NULL, header_length + kept.len);
        if (answer != NULL) {
            char *out = PyBytes_AS_STRING(answer);
            unsigned long long declared = (unsigned long long)(header_length - 4 + kept.len);
            out[0] = (char)(declared >> 24), out[1] = (char)(declared >> 16), out[2] = (char)(declared >> 8);
            out[3] = (char)declared;
            memcpy(out + 4, (char *)whole.buf + 4, (size_t)(header_length - 4));
            memcpy(out + header_length, kept.buf, (size_t)kept.len);
        }
        PyBuffer_Release(&whole);
        PyBuffer_Release(&kept);
        if (answer == NULL) goto done;
    }
    Py_ssize_t sent = PyObject_Length(answer);
    if (sent < 0) goto done;
    self->sent = sent;
    if (done(PyObject_CallOneArg(self->write, answer)) == 0) result = 1;
done:
    Py_XDECREF(answer);
    Py_XDECREF(decision);
    Py_XDECREF(rewritten);
    Py_XDECREF(rewrite);
    parts_release(&parts);
    Py_DECREF(record);
    Py_DECREF(leg);
    Py_DECREF(entry);
    return result;
}

/* pump(splitter): the events of the broker's bytes the splitter holds, acted on in the order a response brings
 * them until it needs data; returns its streaming then (what the core's broker_bytes returns). */
static PyObject *pump(Responses *self, PyObject *splitter) {
    CONFIGURED
    for (;;) {
        PyObject *event = call_method(NextEventName, splitter, NULL, NULL, NULL, 1);
        if (event == NULL) return NULL;
        Py_DECREF(event); /* the events are the module's constants, kept alive by it */
        if (event == EvHeader) {
            PyObject *header = GETATTR(splitter, HeaderName);
            if (header == NULL) return NULL;
            PyObject *action = header_of(self, header);
            Py_DECREF(header);
            if (action == NULL) return NULL;
            PyObject *acted = call_method(ActName, splitter, action, NULL, NULL, 2);
            Py_DECREF(action);
            if (done(acted) < 0) return NULL;
        } else if (event == EvFrame) {
            PyObject *header = GETATTR(splitter, HeaderName);
            if (header == NULL) return NULL;
            PyObject *value = GETATTR(splitter, ValueName);
            if (value == NULL) {
                Py_DECREF(header);
                return NULL;
            }
            int kept = kept_whole(self, value);
            if (kept == 0) kept = charged_whole(self, header, value);
            if (kept < 0) {
                Py_DECREF(header);
                Py_DECREF(value);
                return NULL;
            }
            PyObject *framed =
                kept ? Py_NewRef(Py_None) : call_method(FrameName, (PyObject *)self, header, value, NULL, 3);
            Py_DECREF(header);
            Py_DECREF(value);
            if (done(framed) < 0 || ended(self) < 0) return NULL;
        } else if (event == EvNeedData) {
            return GETATTR(splitter, StreamingName);
        } else if (event == EvLastSegment) {
            if (pass_value(self->write, splitter) < 0 || ended(self) < 0) return NULL;
        } else if (event == EvSegment) {
            if (pass_value(self->write, splitter) < 0) return NULL;
        } else { /* END */
            if (ended(self) < 0) return NULL;
        }
    }
}

/* Responses(flow, write, clock, api_metrics, usage, session, account), as PureResponses. */
static int responses_init(Responses *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"flow", "write", "clock", "api_metrics", "usage", "session", "account", NULL};
    PyObject *flow, *write, *clock, *api_metrics, *usage, *session, *account;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOO", names, &flow, &write, &clock, &api_metrics, &usage,
                                     &session, &account))
        return -1;
    PyObject *queue = (PyObject *)flow_queue(flow);
    if (queue == NULL) return -1;
    PyObject **slots[] = {&self->flow,  (PyObject **)&self->queue, &self->write,   &self->clock,
                          &self->api_metrics, &self->usage,           &self->session, &self->account};
    PyObject *values[] = {flow, queue, write, clock, api_metrics, usage, session, account};
    for (int i = 0; i < 8; i++) {
        Py_INCREF(values[i]);
        Py_XSETREF(*slots[i], values[i]);
    }
    Py_DECREF(queue);
    Py_CLEAR(self->current);
    self->sent = 0;
    self->dropping_since_ns = 0;
    return 0;
}

static int responses_traverse(Responses *self, visitproc visit, void *arg) {
    Py_VISIT(self->flow);
    Py_VISIT(self->session);
    Py_VISIT(self->account);
    Py_VISIT((PyObject *)self->queue);
    Py_VISIT(self->write);
    Py_VISIT(self->clock);
    Py_VISIT(self->api_metrics);
    Py_VISIT(self->usage);
    Py_VISIT((PyObject *)self->current);
    return 0;
}

static int responses_clear(Responses *self) {
    Py_CLEAR(self->flow);
    Py_CLEAR(self->session);
    Py_CLEAR(self->account);
    Py_CLEAR(self->queue);
    Py_CLEAR(self->write);
    Py_CLEAR(self->clock);
    Py_CLEAR(self->api_metrics);
    Py_CLEAR(self->usage);
    Py_CLEAR(self->current);
    return 0;
}

static void responses_dealloc(Responses *self) {
    PyObject_GC_UnTrack(self);
    responses_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *get_current(Responses *self, void *unused) {
    return Py_NewRef(self->current ? (PyObject *)self->current : Py_None);
}

static int set_current(Responses *self, PyObject *value, void *unused) {
    if (value == NULL || value == Py_None) {
        Py_CLEAR(self->current);
        return 0;
    }
    if (as_entry(value) < 0) return -1;
    Py_INCREF(value);
    Py_XSETREF(self->current, (Entry *)value);
    return 0;
}

static PyMethodDef responses_methods[] = {
    {"header", (PyCFunction)header_method, METH_O, "a response's header: STREAM, BUFFER or DROP"},
    {"ended", (PyCFunction)ended_method, METH_NOARGS, "the response's last byte is out (or dropped)"},
    {"_answered", (PyCFunction)(void (*)(void))answered_method, METH_FASTCALL, "a response accounted, once"},
    {"pump", (PyCFunction)pump, METH_O, "act on the splitter's events until it needs data; its streaming then"},
    {NULL},
};

static PyMemberDef responses_members[] = {
    {"_flow", T_OBJECT_EX, offsetof(Responses, flow), READONLY, "the connection's flow"},
    {"_session", T_OBJECT_EX, offsetof(Responses, session), READONLY, "whose SASL exchange raw tokens are"},
    {"_account", T_OBJECT_EX, offsetof(Responses, account), READONLY, "records what a response leg accounted for"},
    {"_queue", T_OBJECT_EX, offsetof(Responses, queue), READONLY, "the flow's in-flight queue"},
    {"_write", T_OBJECT_EX, offsetof(Responses, write), READONLY, "writes to the client"},
    {"_clock", T_OBJECT_EX, offsetof(Responses, clock), READONLY, "the connection's clock (ns)"},
    {"_api_metrics", T_OBJECT_EX, offsetof(Responses, api_metrics), READONLY, "api_key -> its metrics"},
    {"_usage", T_OBJECT_EX, offsetof(Responses, usage), READONLY, "the usage log's recorder"},
    {"_sent", T_PYSSIZET, offsetof(Responses, sent), 0, "the response frame's size as the client gets it"},
    {"dropping_since_ns", T_LONGLONG, offsetof(Responses, dropping_since_ns), 0,
     "a dropped response is arriving: since when (ns), else 0"},
    {NULL},
};

static PyGetSetDef responses_getset[] = {
    {"_current", (getter)get_current, (setter)set_current, "the request whose response is being received", NULL},
    {"receiving", (getter)get_current, NULL, "the request whose response has started arriving and not finished",
     NULL},
    {NULL},
};

PyTypeObject ResponsesType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "proxy.connection._native.Responses",
    .tp_doc = "The response path's per-response methods (proxy.connection.response_frames.PureResponses' twin).",
    .tp_basicsize = sizeof(Responses),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)responses_init,
    .tp_traverse = (traverseproc)responses_traverse,
    .tp_clear = (inquiry)responses_clear,
    .tp_dealloc = (destructor)responses_dealloc,
    .tp_methods = responses_methods,
    .tp_members = responses_members,
    .tp_getset = responses_getset,
};
