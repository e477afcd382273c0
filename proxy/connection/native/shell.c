/* What the event loop calls at every read of either socket of one client connection:
 * proxy.connection.shell.PureShell in C, doing the same at every step (tests/proxy/connection/test_shell_native.py
 * drives both with the same events and compares everything either did). The loop calls these methods as the
 * protocols' get_buffer and buffer_updated, without a Python frame each; what they reach is called through its
 * Python interface, as the pure one calls it, except for two of the flow's plain values, set and read here as the
 * flow's own methods do (Flow.client_read's two attributes, Flow.at_bound's _mid_frame: noted where). */

#include "connection.h"

enum { NOT_OPEN = 0, OPEN = 1, CLOSED = 2 };

/* The view of a buffer's head a call site made last: view[:size] of that view object */
typedef struct {
    PyObject *view, *head;
    Py_ssize_t size;
} Head;

typedef struct {
    PyObject_HEAD
    PyObject *conn, *flow, *timeouts, *queue, *request_splitter, *response_splitter, *requests, *responses,
        *still_there, *send_local_answers, *request_buffer, *response_buffer, *writes, *splices, *counted, *loop,
        *clock, *client_transport, *broker_transport, *upstream;
    Py_ssize_t max_inflight;
    int state;
    char reading_client, reading_broker;
} Shell;

/* The heads of the shared read buffers each call site made last (get_buffer's room and buffer_updated's bytes, for
 * either socket): one per site for the whole process, not per connection, so that no idle connection keeps a block
 * the buffer has moved on from (at most these four views hold one) */
static Head ClientRoom, ClientData, BrokerRoom, BrokerData;

static PyObject *ViewName, *RemainingName, *FullReadsName, *ReadSizeName, *BoundaryReadBytesName, *ReceiveName,
    *PumpName, *HoldBackName, *GetWriteBufferSizeName, *HandOffName, *PossibleName, *AfterClientReadName,
    *AfterBrokerReadName, *ReadClientName, *FrameErrorName, *OnFirstReplyName, *RepliedName,
    *BrokerErrorName, *UnhinderedName, *AtBoundSinceName, *BoundChangedName, *TimeName,
    *ApplyStateName, *StartName, *SendName, *LastReadName, *TimeoutsName, *ReadingPartsName, *EntriesName,
    *RequestText, *Zero, *BoundName, *ReachedName, *SecondsName, *One;
static PyObject *CountedBoundChanged; /* Counted.bound_changed, the function done inline (counted_bound_changed) */
static Py_ssize_t ThrottledReadBytes = -1, SpliceMinBytes = -1;

/* shell_configure (module.c's configure): the two sizes the pure shell imports, THROTTLED_READ_BYTES and
 * SPLICE_MIN_BYTES; 0, or -1 with an error set */
int shell_configure(PyObject *throttled_read_bytes, PyObject *splice_min_bytes, PyObject *bound_changed) {
    const char *names[] = {"view", "remaining", "full_reads", "read_size", "boundary_read_bytes", "receive", "pump",
                           "hold_back", "get_write_buffer_size", "hand_off", "possible", "after_client_read",
                           "after_broker_read", "_read_client", "_frame_error", "on_first_reply", "replied",
                           "_broker_error", "unhindered", "at_bound_since",
                           "bound_changed", "time", "_apply_state", "start", "send", "last_read", "timeouts",
                           "reading_parts", "entries", "request"};
    PyObject **slots[] = {&ViewName, &RemainingName, &FullReadsName, &ReadSizeName, &BoundaryReadBytesName,
                          &ReceiveName, &PumpName, &HoldBackName, &GetWriteBufferSizeName, &HandOffName,
                          &PossibleName, &AfterClientReadName, &AfterBrokerReadName, &ReadClientName,
                          &FrameErrorName, &OnFirstReplyName, &RepliedName, &BrokerErrorName,
                          &UnhinderedName, &AtBoundSinceName, &BoundChangedName, &TimeName,
                          &ApplyStateName, &StartName, &SendName, &LastReadName, &TimeoutsName, &ReadingPartsName,
                          &EntriesName, &RequestText};
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
        if (*slots[i] == NULL && (*slots[i] = PyUnicode_InternFromString(names[i])) == NULL) return -1;
    }
    if (Zero == NULL && (Zero = PyLong_FromLong(0)) == NULL) return -1;
    if (One == NULL && (One = PyLong_FromLong(1)) == NULL) return -1;
    const char *bound_names[] = {"_bound", "reached", "seconds"};
    PyObject **bound_slots[] = {&BoundName, &ReachedName, &SecondsName};
    for (size_t i = 0; i < sizeof bound_slots / sizeof bound_slots[0]; i++) {
        if (*bound_slots[i] == NULL && (*bound_slots[i] = PyUnicode_InternFromString(bound_names[i])) == NULL)
            return -1;
    }
    Py_XSETREF(CountedBoundChanged, Py_NewRef(bound_changed));
    Py_ssize_t throttled = PyLong_AsSsize_t(throttled_read_bytes);
    if (throttled == -1 && PyErr_Occurred()) return -1;
    Py_ssize_t splice_min = PyLong_AsSsize_t(splice_min_bytes);
    if (splice_min == -1 && PyErr_Occurred()) return -1;
    ThrottledReadBytes = throttled;
    SpliceMinBytes = splice_min;
    return 0;
}

#define ALL_FIELDS(X)                                                                                              \
    X(conn) X(flow) X(timeouts) X(queue) X(request_splitter) X(response_splitter) X(requests) X(responses)          \
        X(still_there) X(send_local_answers) X(request_buffer) X(response_buffer) X(writes) X(splices) X(counted) \
            X(loop) X(clock) X(client_transport) X(broker_transport) X(upstream)

static int shell_traverse(Shell *self, visitproc visit, void *arg) {
#define VISIT(field) Py_VISIT(self->field);
    ALL_FIELDS(VISIT)
#undef VISIT
    return 0;
}

/* every reference back to the connection dropped; the buffers kept (the loop's, shared: no cycle) */
static void drop_connection(Shell *self) {
    Py_CLEAR(self->conn);
    Py_CLEAR(self->flow);
    Py_CLEAR(self->timeouts);
    Py_CLEAR(self->queue);
    Py_CLEAR(self->request_splitter);
    Py_CLEAR(self->response_splitter);
    Py_CLEAR(self->requests);
    Py_CLEAR(self->responses);
    Py_CLEAR(self->still_there);
    Py_CLEAR(self->send_local_answers);
    Py_CLEAR(self->writes);
    Py_CLEAR(self->splices);
    Py_CLEAR(self->counted);
    Py_CLEAR(self->loop);
    Py_CLEAR(self->clock);
    Py_CLEAR(self->client_transport);
    Py_CLEAR(self->broker_transport);
    Py_CLEAR(self->upstream);
}

static int shell_clear(Shell *self) {
    drop_connection(self);
    Py_CLEAR(self->request_buffer);
    Py_CLEAR(self->response_buffer);
    return 0;
}

static void shell_dealloc(Shell *self) {
    PyObject_GC_UnTrack(self);
    shell_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Shell(conn, core, buffers, writes, splices, counted, loop, clock) */
static int shell_init(Shell *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"conn", "core", "buffers", "writes", "splices", "counted", "loop", "clock", NULL};
    PyObject *conn, *core, *buffers, *writes, *splices, *counted, *loop, *clock;
    if (ThrottledReadBytes < 0) {
        PyErr_SetString(PyExc_RuntimeError, NOT_CONFIGURED_TEXT);
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOO", names, &conn, &core, &buffers, &writes, &splices,
                                     &counted, &loop, &clock))
        return -1;
    shell_clear(self);
    if ((self->request_buffer = PyObject_GetAttrString(buffers, "request_buffer")) == NULL) return -1;
    if ((self->response_buffer = PyObject_GetAttrString(buffers, "response_buffer")) == NULL) return -1;
    PyObject *parts = call_method(ReadingPartsName, core, NULL, NULL, NULL, 1);
    if (parts == NULL) return -1;
    if (!PyTuple_Check(parts) || PyTuple_GET_SIZE(parts) != 6) {
        Py_DECREF(parts);
        PyErr_SetString(PyExc_TypeError, "core.reading_parts() is not a tuple of 6");
        return -1;
    }
    self->request_splitter = Py_NewRef(PyTuple_GET_ITEM(parts, 0));
    self->response_splitter = Py_NewRef(PyTuple_GET_ITEM(parts, 1));
    self->requests = Py_NewRef(PyTuple_GET_ITEM(parts, 2));
    self->responses = Py_NewRef(PyTuple_GET_ITEM(parts, 3));
    self->still_there = Py_NewRef(PyTuple_GET_ITEM(parts, 4));
    self->send_local_answers = Py_NewRef(PyTuple_GET_ITEM(parts, 5));
    Py_DECREF(parts);
    self->flow = PyObject_GetAttrString(core, "flow");
    if (self->flow == NULL) return -1;
    self->timeouts = GETATTR(self->flow, TimeoutsName);
    if (self->timeouts == NULL) return -1;
    PyObject *inflight = GETATTR(self->flow, InflightName);
    if (inflight == NULL) return -1;
    self->queue = GETATTR(inflight, EntriesName);
    Py_DECREF(inflight);
    if (self->queue == NULL) return -1;
    long long max_inflight;
    if (long_attr(self->flow, MaxInflightName, &max_inflight) < 0) return -1;
    self->max_inflight = (Py_ssize_t)max_inflight;
    self->conn = Py_NewRef(conn);
    self->writes = Py_NewRef(writes);
    self->splices = Py_NewRef(splices);
    self->counted = Py_NewRef(counted);
    self->loop = Py_NewRef(loop);
    self->clock = Py_NewRef(clock);
    self->state = NOT_OPEN;
    self->reading_client = self->reading_broker = 1;
    return 0;
}

/* the number of requests in flight: the queue twin's count, or len() of another queue's entries; -1 on error */
static inline Py_ssize_t inflight_count(PyObject *queue) {
    if (PyObject_TypeCheck(queue, &QueueType)) return ((Queue *)queue)->count;
    return PyObject_Size(queue);
}

/* a value's truth (its reference taken): 1, 0, or -1 with an error set (NULL: the error of reading it) */
static inline int truth_of(PyObject *value) {
    if (value == NULL) return -1;
    int truth = value == Py_True ? 1 : value == Py_False ? 0 : PyObject_IsTrue(value);
    Py_DECREF(value);
    return truth;
}

/* a value as a Py_ssize_t (its reference taken): 0, or -1 with an error set */
static inline int size_of(PyObject *found, Py_ssize_t *value) {
    if (found == NULL) return -1;
    *value = PyLong_AsSsize_t(found);
    Py_DECREF(found);
    return *value == -1 && PyErr_Occurred() ? -1 : 0;
}

/* an attribute's truth, and an attribute as a Py_ssize_t: macros, so that each call site has its own GETATTR cache */
#define attr_true(object, name) truth_of(GETATTR(object, name))
#define size_attr(object, name, value) size_of(GETATTR(object, name), value)

/* view[:size] (a new reference) */
static inline PyObject *head_of(PyObject *view, Py_ssize_t size) {
    PyObject *end = PyLong_FromSsize_t(size);
    if (end == NULL) return NULL;
    PyObject *slice = PySlice_New(NULL, end, NULL);
    Py_DECREF(end);
    if (slice == NULL) return NULL;
    PyObject *head = PyObject_GetItem(view, slice);
    Py_DECREF(slice);
    return head;
}

/* view[:size] as head_of, but the same object this call site handed out last when the view and the size are the
 * same: a head is fixed by the two (the bytes under it are the buffer's, whichever object shows them), so a read
 * of the same length as the last one into the same block makes no new view. A hand-off gives the buffer a new view
 * (SharedReadBuffer): a miss, and the new head kept. */
static PyObject *head_at(Head *last, PyObject *view, Py_ssize_t size) {
    if (last->view == view && last->size == size && last->head != NULL) return Py_NewRef(last->head);
    PyObject *head = head_of(view, size);
    if (head == NULL) return NULL;
    Py_XSETREF(last->view, Py_NewRef(view));
    Py_XSETREF(last->head, Py_NewRef(head));
    last->size = size;
    return head;
}

/* -- the client socket ------------------------------------------------------------------------------------------ */

/* client_buffer(sizehint): the client read's buffer, as PureShell.client_buffer */
static PyObject *client_buffer(Shell *self, PyObject *sizehint) {
    PyObject *view = GETATTR(self->request_buffer, ViewName);
    if (view == NULL || self->state == CLOSED) return view;
    Py_ssize_t available = PyObject_Size(view), remaining, size;
    if (available < 0 || size_attr(self->request_splitter, RemainingName, &remaining) < 0) goto failed;
    int full = attr_true(self->flow, FullReadsName);
    if (full < 0) goto failed;
    if (full) { /* Flow.read_size when nothing holds the next frame and reads are not kept small */
        size = available;
        if (!remaining) {
            Py_ssize_t count = inflight_count(self->queue);
            if (count < 0) goto failed;
            if (count >= self->max_inflight && available > ThrottledReadBytes) size = ThrottledReadBytes;
        }
    } else {
        PyObject *args[] = {self->flow, NULL, NULL};
        if ((args[1] = PyLong_FromSsize_t(available)) == NULL) goto failed;
        if ((args[2] = PyLong_FromSsize_t(remaining)) == NULL) {
            Py_DECREF(args[1]);
            goto failed;
        }
        PyObject *sized = PyObject_VectorcallMethod(ReadSizeName, args, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_DECREF(args[1]);
        Py_DECREF(args[2]);
        if (sized == NULL) goto failed;
        size = PyLong_AsSsize_t(sized);
        Py_DECREF(sized);
        if (size == -1 && PyErr_Occurred()) goto failed;
    }
    if (!remaining) { /* splicing: at a boundary no more than this */
        Py_ssize_t boundary;
        if (size_attr(self->splices, BoundaryReadBytesName, &boundary) < 0) goto failed;
        if (boundary && size > boundary) size = boundary;
    }
    if (size == available) return view;
    PyObject *head = head_at(&ClientRoom, view, size);
    Py_DECREF(view);
    return head;
failed:
    Py_DECREF(view);
    return NULL;
}

/* the connection's fallback for a read the shell does not take: conn.<name>(arg) */
static PyObject *fall_back(Shell *self, PyObject *name, PyObject *arg) {
    PyObject *conn = Py_NewRef(self->conn);
    PyObject *result = call_method(name, conn, arg, NULL, NULL, 2);
    Py_DECREF(conn);
    return result;
}

static PyObject *shell_apply(Shell *self, PyObject *unused);

/* the end of a read both sides share: the bytes handed off if the other side's transport kept them, else a splice
 * looked at, then the flow's state applied; ``after`` the splicer's method for this side */
static PyObject *read_ended(Shell *self, PyObject *other, PyObject *buffer, PyObject *nbytes, Py_ssize_t streaming,
                            PyObject *after) {
    int kept = 0;
    if (other != NULL) { /* (none: the broker's bytes before the client socket is wrapped) */
        PyObject *buffered = call_method(GetWriteBufferSizeName, other, NULL, NULL, NULL, 1);
        if (buffered == NULL) return NULL;
        kept = PyObject_IsTrue(buffered);
        Py_DECREF(buffered);
        if (kept < 0) return NULL;
    }
    if (kept) { /* the other transport may keep a reference to what it could not send yet */
        if (done(call_method(HandOffName, buffer, nbytes, NULL, NULL, 2)) < 0) return NULL;
    } else if (self->state == CLOSED) {
        Py_RETURN_NONE;
    } else if (streaming >= SpliceMinBytes) {
        PyObject *splices = Py_NewRef(self->splices);
        int possible = attr_true(splices, PossibleName);
        int failed = possible < 0 || (possible && done(call_method(after, splices, NULL, NULL, NULL, 1)) < 0);
        Py_DECREF(splices);
        if (failed) return NULL;
    }
    return shell_apply(self, NULL);
}

/* sends the batch if started is true (the finally of the pure one's try); 0, or -1 */
static int batch_sent(PyObject *writes, PyObject *started) {
    int send = started == Py_True;
    Py_DECREF(started);
    return send ? done(call_method(SendName, writes, NULL, NULL, NULL, 1)) : 0;
}

/* the batch sent while an error is raised (the finally of the pure one's try): that error goes on, or the one the
 * send raised, as in Python; NULL */
static PyObject *sent_raising(PyObject *writes, PyObject *started) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (batch_sent(writes, started) < 0) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
        return NULL;
    }
    PyErr_Restore(type, value, traceback);
    return NULL;
}

/* a ProtocolError raised while splitting: the connection (as it was when the read began) told (``name``, with
 * ``arg`` first if given), the batch sent after it; anything else raised goes on after the batch is sent */
static PyObject *split_failed(PyObject *conn, PyObject *writes, PyObject *started, PyObject *name, PyObject *arg) {
    if (!PyErr_ExceptionMatches(ProtocolError)) return sent_raising(writes, started);
    PyObject *type, *exc, *traceback;
    PyErr_Fetch(&type, &exc, &traceback);
    PyErr_NormalizeException(&type, &exc, &traceback);
    Py_XDECREF(type);
    Py_XDECREF(traceback);
    PyObject *told = arg == NULL ? call_method(name, conn, exc, NULL, NULL, 2) : call_method(name, conn, arg, exc, NULL, 3);
    Py_DECREF(exc);
    if (told == NULL) return sent_raising(writes, started);
    Py_DECREF(told);
    if (batch_sent(writes, started) < 0) return NULL;
    Py_RETURN_NONE;
}

/* client_read(nbytes): bytes read from the client, as PureShell.client_read */
static PyObject *client_read_open(Shell *self, PyObject *nbytes);

static PyObject *client_read(Shell *self, PyObject *nbytes) {
    CONFIGURED
    if (self->state != OPEN) {
        if (self->state == NOT_OPEN) return fall_back(self, ReadClientName, nbytes);
        Py_RETURN_NONE;
    }
    /* the references of the read held for its length: the connection may close (and the shell let go) meanwhile */
    PyObject *held[] = {self->conn,     self->flow,     self->timeouts,    self->request_buffer,     self->writes,
                        self->broker_transport, self->request_splitter, self->requests, self->still_there,
                        self->send_local_answers};
    size_t n = sizeof held / sizeof held[0];
    for (size_t i = 0; i < n; i++) Py_INCREF(held[i]);
    PyObject *result = client_read_open(self, nbytes);
    for (size_t i = 0; i < n; i++) Py_DECREF(held[i]);
    return result;
}

static PyObject *client_read_open(Shell *self, PyObject *nbytes) {
    PyObject *conn = self->conn, *flow = self->flow, *buffer = self->request_buffer, *writes = self->writes;
    PyObject *broker = self->broker_transport, *splitter = self->request_splitter;
    /* Flow.client_read(now), its two attributes set here: the idle timeout starts anew; heard from */
    PyObject *now = PyObject_CallNoArgs(self->clock);
    if (now == NULL) return NULL;
    int failed = SETATTR(self->timeouts, LastReadName, now);
    Py_DECREF(now);
    if (failed < 0 || SETATTR(flow, UnheardName, Zero) < 0) return NULL;
    PyObject *view = GETATTR(buffer, ViewName);
    if (view == NULL) return NULL;
    Py_ssize_t size = PyLong_AsSsize_t(nbytes);
    PyObject *data = size == -1 && PyErr_Occurred() ? NULL : head_at(&ClientData, view, size);
    Py_DECREF(view);
    if (data == NULL) return NULL;
    PyObject *started = call_method(StartName, writes, Py_True, NULL, NULL, 2);
    if (started == NULL) {
        Py_DECREF(data);
        return NULL;
    }
    /* ConnectionCore.client_bytes */
    PyObject *received = call_method(ReceiveName, splitter, data, NULL, NULL, 2);
    Py_DECREF(data);
    PyObject *rest = NULL;
    if (received != NULL) {
        Py_DECREF(received);
        rest = call_method(PumpName, self->requests, splitter, self->still_there, self->send_local_answers, 4);
    }
    if (rest != NULL && rest != Py_None) {
        PyObject *kept = call_method(HoldBackName, flow, rest, NULL, NULL, 2);
        Py_DECREF(rest);
        rest = kept;
    }
    Py_ssize_t streaming = 0;
    if (rest != NULL) {
        Py_DECREF(rest);
        if (size_attr(splitter, StreamingName, &streaming) < 0) rest = NULL;
    }
    if (rest == NULL) return split_failed(conn, writes, started, FrameErrorName, RequestText);
    if (batch_sent(writes, started) < 0) return NULL;
    return read_ended(self, broker, buffer, nbytes, streaming, AfterClientReadName);
}

/* -- the broker socket ------------------------------------------------------------------------------------------ */

/* broker_buffer(sizehint): the broker read's buffer, as PureShell.broker_buffer */
static PyObject *broker_buffer(Shell *self, PyObject *sizehint) {
    PyObject *view = GETATTR(self->response_buffer, ViewName);
    if (view == NULL || self->state == CLOSED) return view;
    Py_ssize_t boundary, available, remaining;
    if (size_attr(self->splices, BoundaryReadBytesName, &boundary) < 0) goto failed;
    if (!boundary) return view;
    if ((available = PyObject_Size(view)) < 0) goto failed;
    if (available <= boundary) return view;
    if (size_attr(self->response_splitter, RemainingName, &remaining) < 0) goto failed;
    if (remaining) return view;
    PyObject *head = head_at(&BrokerRoom, view, boundary);
    Py_DECREF(view);
    return head;
failed:
    Py_DECREF(view);
    return NULL;
}

static PyObject *broker_read_open(Shell *self, PyObject *nbytes, PyObject *data);

/* broker_read(nbytes): bytes read from the broker, as PureShell.broker_read */
static PyObject *broker_read(Shell *self, PyObject *nbytes) {
    CONFIGURED
    if (self->state == CLOSED) Py_RETURN_NONE; /* the connection is closed: nothing more is reported */
    if (self->upstream != NULL) {
        PyObject *upstream = Py_NewRef(self->upstream);
        PyObject *told = GETATTR(upstream, OnFirstReplyName);
        int failed = told == NULL;
        if (told != NULL && told != Py_None) failed = done(call_method(RepliedName, upstream, NULL, NULL, NULL, 1)) < 0;
        Py_XDECREF(told);
        Py_DECREF(upstream);
        if (failed) return NULL;
    }
    PyObject *buffer = Py_NewRef(self->response_buffer);
    PyObject *view = GETATTR(buffer, ViewName);
    Py_ssize_t size = PyLong_AsSsize_t(nbytes);
    PyObject *data = view == NULL || (size == -1 && PyErr_Occurred()) ? NULL : head_at(&BrokerData, view, size);
    Py_XDECREF(view);
    PyObject *result = NULL;
    if (data != NULL && self->state == CLOSED) { /* (closed by whoever was told of the first reply) */
        result = Py_NewRef(Py_None);
    } else if (data != NULL) { /* (the client transport is none before it is wrapped) */
        PyObject *held[] = {self->conn, self->writes, self->client_transport, self->response_splitter,
                            self->responses};
        size_t n = sizeof held / sizeof held[0];
        for (size_t i = 0; i < n; i++) Py_XINCREF(held[i]);
        result = broker_read_open(self, nbytes, data);
        for (size_t i = 0; i < n; i++) Py_XDECREF(held[i]);
        Py_DECREF(data);
    }
    Py_DECREF(buffer);
    return result;
}

static PyObject *broker_read_open(Shell *self, PyObject *nbytes, PyObject *data) {
    PyObject *conn = self->conn, *writes = self->writes, *client = self->client_transport, *splitter = self->response_splitter;
    PyObject *started = call_method(StartName, writes, Py_True, NULL, NULL, 2);
    if (started == NULL) return NULL;
    /* ConnectionCore.broker_bytes */
    PyObject *received = call_method(ReceiveName, splitter, data, NULL, NULL, 2);
    PyObject *streamed = NULL;
    if (received != NULL) {
        Py_DECREF(received);
        streamed = call_method(PumpName, self->responses, splitter, NULL, NULL, 2);
    }
    Py_ssize_t streaming = 0;
    if (streamed != NULL) {
        streaming = PyLong_AsSsize_t(streamed);
        Py_DECREF(streamed);
        if (streaming == -1 && PyErr_Occurred()) streamed = NULL;
    }
    if (streamed == NULL) return split_failed(conn, writes, started, BrokerErrorName, NULL);
    if (batch_sent(writes, started) < 0) return NULL;
    return read_ended(self, client, self->response_buffer, nbytes, streaming, AfterBrokerReadName);
}

/* -- applying the flow -------------------------------------------------------------------------------------------- */

/* counted.bound_changed(now): proxy.connection.counted.Counted.bound_changed done on the counted's attributes, without
 * a frame, where its class has that very function and no instance dict (change the two together; a producer with as
 * many requests in flight as the bound reaches it and leaves it at nearly every request); any other bound_changed (a
 * subclass's, one put on the class later) is called. The same reads, sums and sets, in the Python's order. */
PyObject *counted_bound_changed(PyObject *counted, PyObject *now) {
    PyTypeObject *type = Py_TYPE(counted);
    if (CountedBoundChanged == NULL) return PyErr_Format(PyExc_RuntimeError, "configure_shell() was not called");
    if (type->tp_dictoffset != 0 || _PyType_Lookup(type, BoundChangedName) != CountedBoundChanged)
        return call_method(BoundChangedName, counted, now, NULL, NULL, 2);
    PyObject *bound = GETATTR(counted, BoundName);
    if (bound == NULL) return NULL;
    PyObject *since = GETATTR(counted, AtBoundSinceName), *result = NULL;
    if (since == NULL) goto out;
    if (since == Py_None) { /* self.at_bound_since = now; bound.reached += 1 */
        if (SETATTR(counted, AtBoundSinceName, now) < 0) goto out;
        PyObject *reached = GETATTR(bound, ReachedName);
        PyObject *more = reached == NULL ? NULL : PyNumber_InPlaceAdd(reached, One);
        Py_XDECREF(reached);
        int failed = more == NULL ? -1 : SETATTR(bound, ReachedName, more);
        Py_XDECREF(more);
        if (failed < 0) goto out;
    } else { /* bound.seconds += now - self.at_bound_since; self.at_bound_since = None */
        PyObject *seconds = GETATTR(bound, SecondsName);
        PyObject *spent = seconds == NULL ? NULL : PyNumber_Subtract(now, since);
        PyObject *sum = spent == NULL ? NULL : PyNumber_InPlaceAdd(seconds, spent);
        Py_XDECREF(seconds);
        Py_XDECREF(spent);
        int failed = sum == NULL ? -1 : SETATTR(bound, SecondsName, sum);
        Py_XDECREF(sum);
        if (failed < 0 || SETATTR(counted, AtBoundSinceName, Py_None) < 0) goto out;
    }
    result = Py_NewRef(Py_None);
out:
    Py_XDECREF(since);
    Py_DECREF(bound);
    return result;
}

/* apply(): the common case after every event, or the connection's _apply_state, as PureShell.apply */
static PyObject *shell_apply(Shell *self, PyObject *unused) {
    if (self->state == CLOSED) Py_RETURN_NONE;
    PyObject *flow = Py_NewRef(self->flow);
    PyObject *result = NULL;
    int unhindered = attr_true(flow, UnhinderedName);
    if (unhindered < 0) goto out;
    if (unhindered && self->reading_client && self->reading_broker) {
        /* Flow.at_bound (unhindered: the client takes its responses), then Counted.follow_bound inline */
        int at_bound = 0;
        Py_ssize_t count = inflight_count(self->queue);
        if (count < 0) goto out;
        if (count >= self->max_inflight) {
            int mid_frame = attr_true(flow, MidFrameName);
            if (mid_frame < 0) goto out;
            at_bound = !mid_frame;
        }
        PyObject *counted = Py_NewRef(self->counted);
        PyObject *since = GETATTR(counted, AtBoundSinceName);
        if (since != NULL) {
            if (at_bound == (since == Py_None)) {
                PyObject *now = call_method(TimeName, self->loop, NULL, NULL, NULL, 1);
                result = now == NULL ? NULL : counted_bound_changed(counted, now);
                Py_XDECREF(now);
            } else {
                result = Py_NewRef(Py_None);
            }
            Py_DECREF(since);
        }
        Py_DECREF(counted);
        goto out;
    }
    PyObject *conn = Py_NewRef(self->conn);
    result = call_method(ApplyStateName, conn, NULL, NULL, NULL, 1);
    Py_DECREF(conn);
out:
    Py_DECREF(flow);
    return result;
}

/* -- wiring ------------------------------------------------------------------------------------------------------- */

/* broker_reads(upstream): the broker connection's get_buffer and buffer_updated */
static PyObject *broker_reads(Shell *self, PyObject *upstream) {
    Py_XSETREF(self->upstream, Py_NewRef(upstream));
    PyObject *get_buffer = PyObject_GetAttrString((PyObject *)self, "broker_buffer");
    if (get_buffer == NULL) return NULL;
    PyObject *updated = PyObject_GetAttrString((PyObject *)self, "broker_read");
    if (updated == NULL) {
        Py_DECREF(get_buffer);
        return NULL;
    }
    PyObject *pair = PyTuple_Pack(2, get_buffer, updated);
    Py_DECREF(get_buffer);
    Py_DECREF(updated);
    return pair;
}

/* open(client, upstream): both sockets attached, the connection open */
static PyObject *shell_open(Shell *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "open() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (self->state != NOT_OPEN) Py_RETURN_NONE;
    PyObject *transport = PyObject_GetAttrString(args[1], "transport");
    if (transport == NULL) return NULL;
    Py_XSETREF(self->client_transport, Py_NewRef(args[0]));
    Py_XSETREF(self->broker_transport, transport);
    Py_XSETREF(self->upstream, Py_NewRef(args[1]));
    self->state = OPEN;
    Py_RETURN_NONE;
}

/* close(): reads find nothing to do, every reference back to the connection dropped */
static PyObject *shell_close(Shell *self, PyObject *unused) {
    self->state = CLOSED;
    drop_connection(self);
    Py_RETURN_NONE;
}

static PyMethodDef shell_methods[] = {
    {"client_buffer", (PyCFunction)client_buffer, METH_O, "the client read's buffer (asyncio's get_buffer)"},
    {"client_read", (PyCFunction)client_read, METH_O, "bytes read from the client (asyncio's buffer_updated)"},
    {"broker_buffer", (PyCFunction)broker_buffer, METH_O, "the broker read's buffer (asyncio's get_buffer)"},
    {"broker_read", (PyCFunction)broker_read, METH_O, "bytes read from the broker (asyncio's buffer_updated)"},
    {"apply", (PyCFunction)shell_apply, METH_NOARGS, "the flow's state applied after an event"},
    {"broker_reads", (PyCFunction)broker_reads, METH_O, "the broker connection's get_buffer and buffer_updated"},
    {"open", (PyCFunction)(void (*)(void))shell_open, METH_FASTCALL, "both sockets attached: the common path on"},
    {"close", (PyCFunction)shell_close, METH_NOARGS, "closed: reads do nothing, the references let go"},
    {NULL},
};

static PyMemberDef shell_members[] = {
    {"state", T_INT, offsetof(Shell, state), READONLY, "0 not open, 1 open, 2 closed"},
    {"reading_client", T_BOOL, offsetof(Shell, reading_client), 0, "whether the client socket is read"},
    {"reading_broker", T_BOOL, offsetof(Shell, reading_broker), 0, "whether the broker socket is read"},
    {NULL},
};

PyTypeObject ShellType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "proxy.connection._native.Shell",
    .tp_basicsize = sizeof(Shell),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "what the event loop calls at every read of one client connection's sockets (PureShell's twin)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)shell_init,
    .tp_dealloc = (destructor)shell_dealloc,
    .tp_traverse = (traverseproc)shell_traverse,
    .tp_clear = (inquiry)shell_clear,
    .tp_methods = shell_methods,
    .tp_members = shell_members,
};
