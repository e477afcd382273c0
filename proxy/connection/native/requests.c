/* The request path's per-request methods and the client side's event loop: proxy.connection.request_frames'
 * PureRequests in C, doing the same at every step (tests/proxy/connection/test_responses_native.py runs one connection
 * core on each through the same streams and compares everything either side did). request_path.py makes its
 * RequestPath a class over Requests (adding what a buffered request's decision, a lookup, a hold and a throttle need:
 * Python for both); each method below mirrors the pure one of the same name. */

#include "connection.h"

typedef struct {
    PyObject_HEAD
    PyObject *flow;
    Queue *queue; /* the flow's in-flight queue */
    PyObject *scope, *session, *forward, *api_metrics, *clock, *planner, *usage, *spawn, *account;
    PyObject *plan;     /* the plan of the request being buffered */
    PyObject *entry;    /* its in-flight entry, or None */
    PyObject *abandons; /* a set: what to call if the client goes first */
    PyObject *dropped;  /* a set: those released, to drop when decided */
    PyObject *joined;   /* the last two legs joined and their join */
    char answered_locally, gone;
} Requests;

/* header: a request's header; its plan says whether the frame streams, is buffered or dropped. */
static PyObject *header_of(Requests *self, PyObject *header) {
    PyObject *api_key = GETATTR(header, ApiKeyName);
    if (api_key == NULL) return NULL;
    PyObject *metrics = PyObject_CallOneArg(self->api_metrics, api_key);
    Py_DECREF(api_key);
    if (metrics == NULL) return NULL;
    PyObject *size = GETATTR(header, SizeName);
    PyObject *length = size == NULL ? NULL : PyNumber_Add(size, Four); /* its frame_length */
    Py_XDECREF(size);
    if (length == NULL) {
        Py_DECREF(metrics);
        return NULL;
    }
    int counted = count_request(metrics, length);
    Py_DECREF(length);
    Py_DECREF(metrics);
    if (counted < 0) return NULL;
    PyObject *raw = GETATTR(header, RawName);
    if (raw == NULL) return NULL;
    int is_raw = PyObject_IsTrue(raw);
    Py_DECREF(raw);
    if (is_raw < 0) return NULL;
    if (is_raw) return Py_NewRef(ActBuffer); /* a raw SASL token: read whole (it is small), then forwarded */
    if (self->usage != NoUsageRecorder && done(call_method(RequestName, self->usage, header, NULL, NULL, 2)) < 0)
        return NULL;
    PyObject *args[] = {self->scope, self->session, header};
    PyObject *plan = PyObject_Vectorcall(self->planner, args, 3, NULL);
    if (plan == NULL) return NULL;
    long long now;
    if (plan == Pass) {
        Py_DECREF(plan);
        if (clock_ns(self->clock, &now) < 0) return NULL;
        if (done(queue_add(self->queue, header, now, NoLeg)) < 0) return NULL;
        return Py_NewRef(ActStream);
    }
    PyObject *action = NULL, *value = NULL;
    if ((value = GETATTR(plan, UsageName)) == NULL) goto fail;
    if (value != NoUsage && done(PyObject_CallFunctionObjArgs(self->account, header, value, NULL)) < 0) goto fail;
    Py_CLEAR(value);
    if ((action = GETATTR(plan, ActionName)) == NULL) goto fail;
    if ((value = GETATTR(plan, LocalResponseName)) == NULL) goto fail;
    if (value != Py_None) {
        PyObject *expects = GETATTR(header, ExpectsResponseName);
        int answer = expects == NULL ? -1 : PyObject_IsTrue(expects);
        Py_XDECREF(expects);
        if (answer < 0) goto fail;
        if (answer) {
            if (clock_ns(self->clock, &now) < 0 || queue_add_local(self->queue, header, now, value) < 0) goto fail;
            self->answered_locally = 1;
        }
        Py_DECREF(value);
        Py_DECREF(plan);
        return action;
    }
    Py_CLEAR(value);
    if ((value = GETATTR(plan, LegName)) == NULL) goto fail;
    if (clock_ns(self->clock, &now) < 0) goto fail;
    PyObject *entry = queue_add(self->queue, header, now, value);
    if (entry == NULL) goto fail;
    Py_XSETREF(self->entry, entry);
    Py_CLEAR(value);
    if ((value = GETATTR(plan, AbandonName)) == NULL) goto fail;
    if (value != Py_None && PySet_Add(self->abandons, value) < 0) goto fail;
    Py_CLEAR(value);
    if ((value = GETATTR(plan, ThrottleName)) == NULL) goto fail;
    if (value != Py_None && done(call_method(ThrottleMethodName, (PyObject *)self, header, self->entry, value, 4)) < 0)
        goto fail;
    Py_CLEAR(value);
    Py_XSETREF(self->plan, plan);
    return action;
fail:
    Py_XDECREF(value);
    Py_XDECREF(action);
    Py_DECREF(plan);
    return NULL;
}

static PyObject *header_method(Requests *self, PyObject *header) {
    CONFIGURED
    return header_of(self, header);
}

/* Flow.start_frame, its checks and two attributes here (the flow's own method raises where a frame is already
 * started: called then): 1 started, 0 paused at the boundary, -1 an error. ``unheard``: the flow's, just read. */
static int start_frame(Requests *self, long long unheard, long long max_inflight) {
    PyObject *flow = self->flow;
    PyObject *mid = GETATTR(flow, MidFrameName);
    if (mid == NULL) return -1;
    Py_DECREF(mid);
    if (mid != Py_False) { /* a frame started inside another: the FlowError is the flow's to raise */
        PyObject *result = call_method(StartFrameName, flow, NULL, NULL, NULL, 1);
        if (result == NULL) return -1;
        int started = PyObject_IsTrue(result);
        Py_DECREF(result);
        return started;
    }
    PyObject *held = GETATTR(flow, HeldName);
    if (held == NULL) return -1;
    Py_DECREF(held);
    if (held != Py_False || self->queue->count >= max_inflight) return 0; /* _held or at the bound */
    PyObject *count = PyLong_FromLongLong(unheard + 1);
    if (count == NULL) return -1;
    int failed = SETATTR(flow, MidFrameName, Py_True) < 0 || SETATTR(flow, UnheardName, count) < 0;
    Py_DECREF(count);
    return failed ? -1 : 1;
}

/* ended: the request frame's last byte is read (and forwarded, when streamed). Flow.frame_ended's attribute set
 * here (the flow's own method raises where no frame was started: called then). */
static int ended(Requests *self) {
    PyObject *mid = GETATTR(self->flow, MidFrameName);
    if (mid == NULL) return -1;
    Py_DECREF(mid);
    if (mid == Py_True) {
        if (SETATTR(self->flow, MidFrameName, Py_False) < 0) return -1;
    } else if (done(call_method(FrameEndedName, self->flow, NULL, NULL, NULL, 1)) < 0) {
        return -1;
    }
    if (!self->queue->probe_wanted) return 0;
    long long now;
    if (clock_ns(self->clock, &now) < 0) return -1;
    PyObject *ns = PyLong_FromLongLong(now);
    if (ns == NULL) return -1;
    PyObject *probe = call_method(ProbeName, (PyObject *)self->queue, ns, NULL, NULL, 2);
    Py_DECREF(ns);
    if (probe == NULL) return -1;
    PyObject *sent = PyObject_CallOneArg(self->forward, probe);
    Py_DECREF(probe);
    return done(sent);
}

static PyObject *ended_method(Requests *self, PyObject *unused) {
    CONFIGURED
    if (ended(self) < 0) return NULL;
    Py_RETURN_NONE;
}

static int send_local(Requests *self, PyObject *send_local_answers) { /* the answers whose turn has come go */
    if (!self->answered_locally) return 0;
    return done(PyObject_CallNoArgs(send_local_answers));
}

static int truth(PyObject *result) { /* a call's result as a bool: 1, 0, or -1 (its error) */
    if (result == NULL) return -1;
    int value = PyObject_IsTrue(result);
    Py_DECREF(result);
    return value;
}

/* the last two legs joined and their join reused, as _Decisions._join: ``leg`` then ``more`` (a new reference) */
static PyObject *join(Requests *self, PyObject *leg, PyObject *more) {
    PyObject *joined = self->joined;
    if (PyTuple_GET_ITEM(joined, 0) == leg && PyTuple_GET_ITEM(joined, 1) == more)
        return Py_NewRef(PyTuple_GET_ITEM(joined, 2));
    PyObject *combined = call_method(ThenName, leg, more, NULL, NULL, 2);
    if (combined == NULL) return NULL;
    PyObject *kept = PyTuple_Pack(3, leg, more, combined);
    if (kept == NULL) {
        Py_DECREF(combined);
        return NULL;
    }
    Py_XSETREF(self->joined, kept);
    return combined;
}

/* A buffered request decided on its body the common way, as _Decisions.frame and _act decide it: not a raw token,
 * its plan's decide set and no abandon, the outcome a ForwardRequest that keeps the body, adds no throttle and
 * accounted for nothing: its leg joined to the entry's, the frame forwarded. Another outcome goes to _act, as frame()
 * hands it on; a decide that raised ValueError is the ProtocolError the Python raises. 1: decided here; 0: not such a
 * request, nothing done (frame() takes it); -1: an error. */
static int decided(Requests *self, PyObject *header, PyObject *frame) {
    PyObject *raw = GETATTR(header, RawName);
    if (raw == NULL) return -1;
    int is_raw = PyObject_IsTrue(raw);
    Py_DECREF(raw);
    if (is_raw) return is_raw < 0 ? -1 : 0;
    PyObject *plan = Py_NewRef(self->plan), *entry = NULL, *body = NULL, *outcome = NULL;
    PyObject *decide = GETATTR(plan, DecideName), *abandon = NULL;
    int result = -1;
    if (decide == NULL || (abandon = GETATTR(plan, AbandonName)) == NULL) goto out;
    if (decide == Py_None || abandon != Py_None) {
        result = 0;
        goto out;
    }
    Py_XSETREF(self->plan, Py_NewRef(Pass)); /* taken, as frame() takes them */
    entry = self->entry;
    self->entry = Py_NewRef(Py_None);
    long long header_length;
    if (long_attr(header, HeaderLengthName, &header_length) < 0) goto out;
    if ((body = view_from(frame, (Py_ssize_t)header_length)) == NULL) goto out;
    outcome = PyObject_CallOneArg(decide, body);
    Py_CLEAR(body); /* the frame's view let go at once, as the Python's temporary is */
    if (outcome == NULL) {
        if (PyErr_ExceptionMatches(PyExc_ValueError)) { /* raise _undecidable(header, exc) from None */
            PyObject *type, *exc, *traceback;
            PyErr_Fetch(&type, &exc, &traceback);
            PyErr_NormalizeException(&type, &exc, &traceback);
            Py_XDECREF(type);
            Py_XDECREF(traceback);
            PyObject *error = call_method(UndecidableName, (PyObject *)self, header, exc, NULL, 3);
            Py_XDECREF(exc);
            if (error != NULL) {
                PyException_SetCause(error, NULL);
                PyErr_SetObject((PyObject *)Py_TYPE(error), error);
                Py_DECREF(error);
            }
        }
        goto out;
    }
    if (Py_TYPE(outcome) == (PyTypeObject *)ForwardRequestClass) {
        PyObject *kept = GETATTR(outcome, BodyName);
        PyObject *throttle = kept == NULL ? NULL : GETATTR(outcome, ThrottleName);
        PyObject *usage = throttle == NULL ? NULL : GETATTR(outcome, UsageName);
        int plain = usage != NULL && kept == Py_None && throttle == Py_None && usage == NoUsage;
        Py_XDECREF(kept);
        Py_XDECREF(throttle);
        Py_XDECREF(usage);
        if (usage == NULL) goto out;
        if (plain) {
            PyObject *more = GETATTR(outcome, LegName);
            if (more == NULL) goto out;
            int failed = 0;
            if (entry != Py_None && more != NoLeg) {
                PyObject *leg = GETATTR(entry, LegName);
                PyObject *joined = leg == NULL ? NULL : join(self, leg, more);
                Py_XDECREF(leg);
                failed = joined == NULL || SETATTR(entry, LegName, joined) < 0;
                Py_XDECREF(joined);
            }
            Py_DECREF(more);
            if (failed || done(PyObject_CallOneArg(self->forward, frame)) < 0) goto out;
            result = 1;
            goto out;
        }
    }
    PyObject *args[] = {(PyObject *)self, header, frame, entry, outcome, Py_None};
    if (done(PyObject_VectorcallMethod(ActMethodName, args, 6 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL)) == 0)
        result = 1;
out:
    Py_XDECREF(outcome);
    Py_XDECREF(body);
    Py_XDECREF(entry);
    Py_XDECREF(abandon);
    Py_XDECREF(decide);
    Py_DECREF(plan);
    return result;
}

/* pump(splitter, still_there, send_local_answers): the events of the client's bytes the splitter holds, acted on
 * in the order a request brings them until it needs data (None) or the flow paused at a boundary (the bytes left, or
 * None if the client was found gone), as the core's _pull_requests. */
static PyObject *pump(Requests *self, PyObject *const *args, Py_ssize_t nargs) {
    CONFIGURED
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "pump() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *splitter = args[0], *still_there = args[1], *send_local_answers = args[2];
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
            if (done(acted) < 0 || send_local(self, send_local_answers) < 0) return NULL;
        } else if (event == EvBoundary) {
            /* Many requests unheard from the client, or reading stops here with one more read: is it still there?
             * A gone client's requests not forwarded yet never are. */
            long long unheard, max_inflight;
            if (long_attr(self->flow, UnheardName, &unheard) < 0) return NULL;
            if (long_attr(self->flow, MaxInflightName, &max_inflight) < 0) return NULL;
            if (unheard >= max_inflight) {
                int there = truth(PyObject_CallNoArgs(still_there));
                if (there < 0) return NULL;
                if (!there) {
                    if (done(call_method(TakeRestName, splitter, NULL, NULL, NULL, 1)) < 0) return NULL;
                    Py_RETURN_NONE;
                }
            }
            if (unheard >= max_inflight && long_attr(self->flow, UnheardName, &unheard) < 0) return NULL;
            int started = start_frame(self, unheard, max_inflight);
            if (started < 0) return NULL;
            if (!started) {
                PyObject *rest = call_method(TakeRestName, splitter, NULL, NULL, NULL, 1);
                if (rest == NULL) return NULL;
                if (long_attr(self->flow, UnheardName, &unheard) < 0) {
                    Py_DECREF(rest);
                    return NULL;
                }
                if (unheard) {
                    int there = truth(PyObject_CallNoArgs(still_there));
                    if (there <= 0) {
                        Py_DECREF(rest);
                        if (there < 0) return NULL;
                        Py_RETURN_NONE;
                    }
                }
                return rest;
            }
        } else if (event == EvNeedData) {
            Py_RETURN_NONE;
        } else if (event == EvLastSegment) {
            if (pass_value(self->forward, splitter) < 0 || ended(self) < 0) return NULL;
        } else if (event == EvFrame) {
            PyObject *header = GETATTR(splitter, HeaderName);
            if (header == NULL) return NULL;
            PyObject *value = GETATTR(splitter, ValueName);
            if (value == NULL) {
                Py_DECREF(header);
                return NULL;
            }
            int fast = decided(self, header, value);
            PyObject *acted = fast ? (fast < 0 ? NULL : Py_NewRef(Py_None))
                                   : call_method(FrameName, (PyObject *)self, header, value, NULL, 3);
            Py_DECREF(header);
            Py_DECREF(value);
            if (done(acted) < 0 || send_local(self, send_local_answers) < 0 || ended(self) < 0) return NULL;
        } else if (event == EvSegment) {
            if (pass_value(self->forward, splitter) < 0) return NULL;
        } else { /* END */
            if (ended(self) < 0) return NULL;
        }
    }
}

/* Requests(flow, scope, session, forward, api_metrics, clock, planner, usage, spawn, account), as PureRequests. */
static int requests_init(Requests *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"flow",  "scope",   "session", "forward", "api_metrics",
                            "clock", "planner", "usage",   "spawn",   "account",     NULL};
    PyObject *values[10];
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOOOO", names, &values[0], &values[1], &values[2],
                                     &values[3], &values[4], &values[5], &values[6], &values[7], &values[8],
                                     &values[9]))
        return -1;
    Queue *queue = flow_queue(values[0]);
    if (queue == NULL) return -1;
    PyObject *abandons = PySet_New(NULL), *dropped = PySet_New(NULL);
    PyObject *joined = PyTuple_Pack(3, NoLeg, NoLeg, NoLeg);
    if (abandons == NULL || dropped == NULL || joined == NULL) {
        Py_XDECREF(abandons);
        Py_XDECREF(dropped);
        Py_XDECREF(joined);
        Py_DECREF(queue);
        return -1;
    }
    PyObject **slots[] = {&self->flow,    &self->scope, &self->session, &self->forward, &self->api_metrics,
                          &self->clock,   &self->planner, &self->usage, &self->spawn,   &self->account};
    for (int i = 0; i < 10; i++) {
        Py_INCREF(values[i]);
        Py_XSETREF(*slots[i], values[i]);
    }
    Py_XSETREF(self->queue, queue);
    Py_XSETREF(self->abandons, abandons);
    Py_XSETREF(self->dropped, dropped);
    Py_XSETREF(self->joined, joined);
    Py_XSETREF(self->plan, Py_NewRef(Pass));
    Py_XSETREF(self->entry, Py_NewRef(Py_None));
    self->answered_locally = self->gone = 0;
    return 0;
}

#define EACH_OBJECT(DO)                                                                                            \
    DO(self->flow);                                                                                                \
    DO(self->queue);                                                                                               \
    DO(self->scope);                                                                                               \
    DO(self->session);                                                                                             \
    DO(self->forward);                                                                                             \
    DO(self->api_metrics);                                                                                         \
    DO(self->clock);                                                                                               \
    DO(self->planner);                                                                                             \
    DO(self->usage);                                                                                               \
    DO(self->spawn);                                                                                               \
    DO(self->account);                                                                                             \
    DO(self->plan);                                                                                                \
    DO(self->entry);                                                                                               \
    DO(self->abandons);                                                                                            \
    DO(self->dropped);                                                                                             \
    DO(self->joined)

static int requests_traverse(Requests *self, visitproc visit, void *arg) {
#define VISIT(field) Py_VISIT((PyObject *)(field))
    EACH_OBJECT(VISIT);
#undef VISIT
    return 0;
}

static int requests_clear(Requests *self) {
    EACH_OBJECT(Py_CLEAR);
    return 0;
}

static void requests_dealloc(Requests *self) {
    PyObject_GC_UnTrack(self);
    requests_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef requests_methods[] = {
    {"header", (PyCFunction)header_method, METH_O, "a request's header: STREAM, BUFFER or DROP, as its plan says"},
    {"ended", (PyCFunction)ended_method, METH_NOARGS, "the request frame's last byte is read"},
    {"pump", (PyCFunction)(void (*)(void))pump, METH_FASTCALL,
     "act on the splitter's events until it needs data or the flow pauses at a boundary"},
    {NULL},
};

#define MEMBER(name, field, flags, doc) {name, T_OBJECT_EX, offsetof(Requests, field), flags, doc}

static PyMemberDef requests_members[] = {
    MEMBER("_flow", flow, READONLY, "the connection's flow"),
    MEMBER("_scope", scope, READONLY, "the listener's scope"),
    MEMBER("_session", session, READONLY, "the connection's session"),
    MEMBER("_forward", forward, READONLY, "writes to the broker socket"),
    MEMBER("_api_metrics", api_metrics, READONLY, "api_key -> its metrics"),
    MEMBER("_clock", clock, READONLY, "the connection's clock (ns)"),
    MEMBER("_planner", planner, READONLY, "(scope, session, header) -> Plan"),
    MEMBER("_usage", usage, READONLY, "the usage log's recorder"),
    {"_spawn", T_OBJECT, offsetof(Requests, spawn), READONLY, "runs the proxy's own work, or None"},
    MEMBER("account", account, READONLY, "records what plans, outcomes and legs accounted for"),
    MEMBER("_plan", plan, 0, "the plan of the request being buffered"),
    {"_entry", T_OBJECT, offsetof(Requests, entry), 0, "its in-flight entry, or None"},
    MEMBER("_abandons", abandons, 0, "what to call if the client goes first"),
    MEMBER("_dropped", dropped, 0, "those released, to drop when decided"),
    MEMBER("_joined", joined, 0, "the last two legs joined and their join"),
    {"answered_locally", T_BOOL, offsetof(Requests, answered_locally), 0, "a request was answered by the proxy"},
    {"_gone", T_BOOL, offsetof(Requests, gone), 0, "the client closed"},
    {NULL},
};

PyTypeObject RequestsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "proxy.connection._native.Requests",
    .tp_doc = "The request path's per-request methods (proxy.connection.request_frames.PureRequests' twin).",
    .tp_basicsize = sizeof(Requests),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)requests_init,
    .tp_traverse = (traverseproc)requests_traverse,
    .tp_clear = (inquiry)requests_clear,
    .tp_dealloc = (destructor)requests_dealloc,
    .tp_methods = requests_methods,
    .tp_members = requests_members,
};
