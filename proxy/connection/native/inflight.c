/* The queue of requests in flight: proxy.connection.inflight.PureInFlightQueue and PureInFlight in C, the same queue
 * answering the same at every step (tests/proxy/connection/test_inflight_native.py drives both through the same
 * operations and compares every answer, error and field). proxy/connection/inflight.py makes its InFlightQueue a
 * class over Queue (adding the proxy's own requests: the acks=0 probe and the lookups, rare, Python for both) and its
 * InFlight this Entry. Each method below mirrors the pure one of the same name.
 *
 * The entries are a ring of Entry pointers (a deque's operations: append, popleft, pop, remove). An entry keeps its
 * header's correlation id, read once when it is made: a request header never changes. */

#include "connection.h"

/* -- an entry: InFlight -------------------------------------------------------------------------------------- */

static int entry_fill(Entry *self, PyObject *header, long long received_ns, int expects, PyObject *leg,
                      PyObject *local_response, PyObject *throttle, int throttled, int probe) {
    PyObject *cid = GETATTR(header, CorrelationIdName);
    if (cid == NULL) return -1;
    long long value = as_long_long(cid);
    Py_DECREF(cid);
    if (value == -1 && PyErr_Occurred()) return -1;
    Py_INCREF(header);
    Py_XSETREF(self->header, header);
    Py_INCREF(leg);
    Py_XSETREF(self->leg, leg);
    Py_INCREF(local_response);
    Py_XSETREF(self->local_response, local_response);
    Py_INCREF(throttle);
    Py_XSETREF(self->throttle, throttle);
    self->received_ns = received_ns;
    self->correlation_id = value;
    self->expects_response = (char)expects;
    self->throttled = (char)throttled;
    self->probe = (char)probe;
    return 0;
}

/* An entry made here (not through the type's call): the hot path's. */
static Entry *entry_new(PyObject *header, long long received_ns, int expects, PyObject *leg, PyObject *local_response,
                        int probe) {
    Entry *self = PyObject_GC_New(Entry, &EntryType);
    if (self == NULL) return NULL;
    self->header = self->leg = self->local_response = self->throttle = NULL;
    if (entry_fill(self, header, received_ns, expects, leg, local_response, Py_None, 0, probe) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    PyObject_GC_Track(self);
    return self;
}

/* InFlight(header, received_ns, expects_response, leg=NO_LEG, local_response=None, throttle=None, throttled=False,
 * probe=False), as the pure dataclass takes them. */
static int entry_init(Entry *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"header",   "received_ns", "expects_response", "leg", "local_response",
                            "throttle", "throttled",   "probe",            NULL};
    PyObject *header, *leg = NoLeg, *local_response = Py_None, *throttle = Py_None;
    long long received_ns;
    int expects, throttled = 0, probe = 0;
    if (NoLeg == NULL) {
        PyErr_SetString(PyExc_RuntimeError, NOT_CONFIGURED_TEXT);
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OLp|OOOpp", names, &header, &received_ns, &expects, &leg,
                                     &local_response, &throttle, &throttled, &probe))
        return -1;
    return entry_fill(self, header, received_ns, expects, leg, local_response, throttle, throttled, probe);
}

static int entry_traverse(Entry *self, visitproc visit, void *arg) {
    Py_VISIT(self->header);
    Py_VISIT(self->leg);
    Py_VISIT(self->local_response);
    Py_VISIT(self->throttle);
    return 0;
}

static int entry_clear(Entry *self) {
    Py_CLEAR(self->header);
    Py_CLEAR(self->leg);
    Py_CLEAR(self->local_response);
    Py_CLEAR(self->throttle);
    return 0;
}

static void entry_dealloc(Entry *self) {
    PyObject_GC_UnTrack(self);
    entry_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *entry_repr(Entry *self) {
    return PyUnicode_FromFormat("InFlight(header=%R, received_ns=%lld, expects_response=%s, leg=%R, "
                                "local_response=%R, throttle=%R, throttled=%s, probe=%s)",
                                self->header ? self->header : Py_None, self->received_ns,
                                self->expects_response ? "True" : "False", self->leg ? self->leg : Py_None,
                                self->local_response ? self->local_response : Py_None,
                                self->throttle ? self->throttle : Py_None, self->throttled ? "True" : "False",
                                self->probe ? "True" : "False");
}

/* The object fields may be set to anything but deleted (None stands for none), as the dataclass's slots. */
static PyObject *get_object(Entry *self, void *offset) {
    PyObject *value = *(PyObject **)((char *)self + (size_t)offset);
    if (value == NULL) value = Py_None;
    return Py_NewRef(value);
}

static int set_object(Entry *self, PyObject *value, void *offset) {
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "an in-flight entry's fields cannot be deleted");
        return -1;
    }
    Py_INCREF(value);
    Py_XSETREF(*(PyObject **)((char *)self + (size_t)offset), value);
    return 0;
}

static PyObject *get_flag(Entry *self, void *offset) { return PyBool_FromLong(*((char *)self + (size_t)offset)); }

static int set_flag(Entry *self, PyObject *value, void *offset) {
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "an in-flight entry's fields cannot be deleted");
        return -1;
    }
    int truth = PyObject_IsTrue(value);
    if (truth < 0) return -1;
    *((char *)self + (size_t)offset) = (char)truth;
    return 0;
}

static PyObject *get_received_ns(Entry *self, void *unused) { return PyLong_FromLongLong(self->received_ns); }

#define OFFSET(field) ((void *)offsetof(Entry, field))

static PyGetSetDef entry_getset[] = {
    {"header", (getter)get_object, NULL, "the request's header", OFFSET(header)},
    {"received_ns", (getter)get_received_ns, NULL, "when the request's header was read (ns)", NULL},
    {"expects_response", (getter)get_flag, NULL, "the broker answers it", OFFSET(expects_response)},
    {"leg", (getter)get_object, (setter)set_object, "what the response needs besides its bytes", OFFSET(leg)},
    {"local_response", (getter)get_object, (setter)set_object, "the proxy's own answer, or None",
     OFFSET(local_response)},
    {"throttle", (getter)get_object, (setter)set_object, "the quota throttle going with the response, or None",
     OFFSET(throttle)},
    {"throttled", (getter)get_flag, (setter)set_flag, "the throttle was decided with the request", OFFSET(throttled)},
    {"probe", (getter)get_flag, NULL, "the proxy's own acks=0 probe", OFFSET(probe)},
    {NULL},
};

PyTypeObject EntryType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "proxy.connection._native.InFlight",
    .tp_doc = "A request sent upstream and waiting for its response (proxy.connection.inflight.PureInFlight's twin).",
    .tp_basicsize = sizeof(Entry),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)entry_init,
    .tp_traverse = (traverseproc)entry_traverse,
    .tp_clear = (inquiry)entry_clear,
    .tp_dealloc = (destructor)entry_dealloc,
    .tp_repr = (reprfunc)entry_repr,
    .tp_getset = entry_getset,
};

/* -- the queue: InFlightQueue's hot methods ------------------------------------------------------------------- */

#define AT(q, i) ((q)->ring[((q)->head + (i)) & ((q)->capacity - 1)])

static int grow(Queue *self) {
    Py_ssize_t capacity = self->capacity ? self->capacity * 2 : 8;
    Entry **ring = PyMem_New(Entry *, capacity);
    if (ring == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < self->count; i++) ring[i] = AT(self, i);
    PyMem_Free(self->ring);
    self->ring = ring;
    self->head = 0;
    self->capacity = capacity;
    return 0;
}

static int push(Queue *self, Entry *entry) { /* steals entry */
    if (self->count == self->capacity && grow(self) < 0) {
        Py_DECREF(entry);
        return -1;
    }
    AT(self, self->count) = entry;
    self->count++;
    return 0;
}

static Entry *popleft(Queue *self) { /* a new reference; count > 0 */
    Entry *entry = self->ring[self->head];
    self->head = (self->head + 1) & (self->capacity - 1);
    self->count--;
    return entry;
}

static Entry *take(Queue *self, Py_ssize_t i) { /* the i-th entry out, a new reference; the rest keep their order */
    Entry *entry = AT(self, i);
    for (Py_ssize_t j = i; j + 1 < self->count; j++) AT(self, j) = AT(self, j + 1);
    self->count--;
    return entry;
}

static int remove_entry(Queue *self, PyObject *entry) { /* deque.remove: the entry itself (identity) */
    for (Py_ssize_t i = 0; i < self->count; i++) {
        if ((PyObject *)AT(self, i) == entry) {
            Py_DECREF(take(self, i));
            return 0;
        }
    }
    PyErr_SetString(PyExc_ValueError, "the entry is not in flight");
    return -1;
}

static Py_ssize_t queue_length(Queue *self) { return self->count; }

PyObject *queue_add(Queue *self, PyObject *header, long long received_ns, PyObject *leg) {
    PyObject *acks = GETATTR(header, AcksName);
    if (acks == NULL) return NULL;
    int expects;
    if (acks == Py_None) {
        expects = 1;
    } else {
        PyObject *zero = PyLong_FromLong(0);
        expects = zero == NULL ? -1 : PyObject_RichCompareBool(acks, zero, Py_NE);
        Py_XDECREF(zero);
    }
    Py_DECREF(acks);
    if (expects < 0) return NULL;
    if (!expects) {
        if (self->answers_acks0 == 0) Py_RETURN_NONE;
        if (self->answers_acks0 < 0 && !self->probe_sent) self->probe_wanted = 1;
    }
    Entry *entry = entry_new(header, received_ns, expects, leg, Py_None, 0);
    if (entry == NULL) return NULL;
    Py_INCREF(entry);
    if (push(self, entry) < 0) {
        Py_DECREF(entry);
        return NULL;
    }
    return (PyObject *)entry;
}

/* add(header, received_ns, leg=NO_LEG) */
static PyObject *add(Queue *self, PyObject *const *args, Py_ssize_t nargs) {
    CONFIGURED
    if (nargs < 2 || nargs > 3) {
        PyErr_Format(PyExc_TypeError, "add() takes 2 or 3 arguments (%zd given)", nargs);
        return NULL;
    }
    long long received_ns = as_long_long(args[1]);
    if (received_ns == -1 && PyErr_Occurred()) return NULL;
    return queue_add(self, args[0], received_ns, nargs == 3 ? args[2] : NoLeg);
}

int queue_add_local(Queue *self, PyObject *header, long long received_ns, PyObject *response) {
    Entry *entry = entry_new(header, received_ns, 1, NoLeg, response, 0);
    if (entry == NULL || push(self, entry) < 0) return -1;
    self->local_answers++;
    return 0;
}

/* add_local(header, received_ns, response) */
static PyObject *add_local(Queue *self, PyObject *const *args, Py_ssize_t nargs) {
    CONFIGURED
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "add_local() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    long long received_ns = as_long_long(args[1]);
    if (received_ns == -1 && PyErr_Occurred()) return NULL;
    if (queue_add_local(self, args[0], received_ns, args[2]) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *pop_ready_local(Queue *self, PyObject *unused) {
    if (!self->local_answers) Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < self->count; i++) {
        Entry *entry = AT(self, i);
        if (entry->local_response != Py_None) {
            self->local_answers--;
            return (PyObject *)take(self, i);
        }
        if (entry->expects_response) Py_RETURN_NONE;
    }
    Py_RETURN_NONE;
}

/* answer_locally(entry, response) */
static PyObject *answer_locally(Queue *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "answer_locally() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (as_entry(args[0]) < 0) return NULL;
    Entry *entry = (Entry *)args[0];
    if (entry->expects_response) {
        Py_INCREF(args[1]);
        Py_XSETREF(entry->local_response, args[1]);
        self->local_answers++;
    } else if (remove_entry(self, args[0]) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *abandon(Queue *self, PyObject *entry) {
    if (remove_entry(self, entry) < 0) return NULL;
    Py_RETURN_NONE;
}

static void learn(Queue *self, int answers) {
    if (self->answers_acks0 >= 0) return;
    self->answers_acks0 = answers;
    self->probe_wanted = 0;
    if (!answers) { /* the silent entries are retired: the broker will never answer them */
        Py_ssize_t kept = 0, count = self->count;
        for (Py_ssize_t i = 0; i < count; i++) {
            Entry *entry = AT(self, i);
            if (entry->expects_response)
                AT(self, kept++) = entry;
            else
                Py_DECREF(entry);
        }
        self->count = kept;
    }
}

PyObject *queue_match(Queue *self, long long correlation_id) {
    while (self->count) {
        Entry *entry = popleft(self);
        if (entry->local_response != Py_None) {
            PyErr_Format(ProtocolError,
                         "response correlation id %lld arrived while the proxy's own answer to %lld was still queued",
                         correlation_id, entry->correlation_id);
            Py_DECREF(entry);
            return NULL;
        }
        if (entry->correlation_id == correlation_id) {
            if (entry->probe) {
                Py_DECREF(entry);
                Py_RETURN_NONE;
            }
            if (entry->expects_response) return (PyObject *)entry;
            Py_DECREF(entry);
            learn(self, 1);
            Py_RETURN_NONE;
        }
        if (entry->expects_response) {
            PyErr_Format(ProtocolError,
                         "response correlation id %lld does not match the oldest request in flight (%lld)",
                         correlation_id, entry->correlation_id);
            Py_DECREF(entry);
            return NULL;
        }
        Py_DECREF(entry);
        learn(self, 0);
    }
    PyErr_Format(ProtocolError, "response correlation id %lld with no request in flight", correlation_id);
    return NULL;
}

static PyObject *match(Queue *self, PyObject *arg) {
    CONFIGURED
    long long correlation_id = as_long_long(arg);
    if (correlation_id == -1 && PyErr_Occurred()) return NULL;
    return queue_match(self, correlation_id);
}

static PyObject *oldest_waiting_ns(Queue *self, PyObject *unused) {
    int answers_acks0 = self->answers_acks0 == 1;
    for (Py_ssize_t i = 0; i < self->count; i++) {
        Entry *entry = AT(self, i);
        if (entry->expects_response || answers_acks0) return PyLong_FromLongLong(entry->received_ns);
    }
    Py_RETURN_NONE;
}

static PyObject *awaiting_response(Queue *self, PyObject *unused) {
    for (Py_ssize_t i = 0; i < self->count; i++) {
        Entry *entry = AT(self, i);
        if (entry->expects_response && !entry->probe) Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

/* What the Python class adds (its own requests: the probe, the lookups) works through these four. */
static PyObject *append_entry(Queue *self, PyObject *entry) {
    if (as_entry(entry) < 0) return NULL;
    Py_INCREF(entry);
    if (push(self, (Entry *)entry) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *probe_went(Queue *self, PyObject *unused) {
    self->probe_sent = 1;
    self->probe_wanted = 0;
    Py_RETURN_NONE;
}

static PyObject *last_entry(Queue *self, PyObject *unused) {
    if (!self->count) Py_RETURN_NONE;
    return Py_NewRef((PyObject *)AT(self, self->count - 1));
}

static PyObject *pop_last(Queue *self, PyObject *unused) {
    if (!self->count) {
        PyErr_SetString(PyExc_IndexError, "pop from an empty queue");
        return NULL;
    }
    self->count--;
    return (PyObject *)AT(self, self->count);
}

static PyObject *queue_iter(Queue *self) { /* over the entries as they are now */
    PyObject *entries = PyTuple_New(self->count);
    if (entries == NULL) return NULL;
    for (Py_ssize_t i = 0; i < self->count; i++) PyTuple_SET_ITEM(entries, i, Py_NewRef((PyObject *)AT(self, i)));
    PyObject *iterator = PyObject_GetIter(entries);
    Py_DECREF(entries);
    return iterator;
}

static PyObject *get_entries(Queue *self, void *unused) { return Py_NewRef((PyObject *)self); }

static PyObject *get_answers_acks0(Queue *self, void *unused) {
    if (self->answers_acks0 < 0) Py_RETURN_NONE;
    return PyBool_FromLong(self->answers_acks0);
}

static int set_answers_acks0(Queue *self, PyObject *value, void *unused) {
    if (value == NULL || value == Py_None) {
        self->answers_acks0 = -1;
        return 0;
    }
    int truth = PyObject_IsTrue(value);
    if (truth < 0) return -1;
    self->answers_acks0 = truth;
    return 0;
}

static PyObject *get_queue_flag(Queue *self, void *offset) { return PyBool_FromLong(*((char *)self + (size_t)offset)); }

static int set_queue_flag(Queue *self, PyObject *value, void *offset) {
    int truth = value == NULL ? 0 : PyObject_IsTrue(value);
    if (truth < 0) return -1;
    *((char *)self + (size_t)offset) = (char)truth;
    return 0;
}

static int queue_init(Queue *self, PyObject *args, PyObject *kwargs) {
    if (PyTuple_GET_SIZE(args) || (kwargs && PyDict_GET_SIZE(kwargs))) {
        PyErr_SetString(PyExc_TypeError, "InFlightQueue() takes no arguments");
        return -1;
    }
    self->answers_acks0 = -1;
    return 0;
}

static int queue_traverse(Queue *self, visitproc visit, void *arg) {
    for (Py_ssize_t i = 0; i < self->count; i++) Py_VISIT((PyObject *)AT(self, i));
    return 0;
}

static int queue_clear(Queue *self) {
    while (self->count) Py_DECREF(popleft(self));
    return 0;
}

static void queue_dealloc(Queue *self) {
    PyObject_GC_UnTrack(self);
    queue_clear(self);
    PyMem_Free(self->ring);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef queue_methods[] = {
    {"add", (PyCFunction)(void (*)(void))add, METH_FASTCALL, "queue a forwarded request (None: acks=0, not queued)"},
    {"add_local", (PyCFunction)(void (*)(void))add_local, METH_FASTCALL, "a request the proxy answers itself"},
    {"pop_ready_local", (PyCFunction)pop_ready_local, METH_NOARGS, "the oldest local answer whose turn has come"},
    {"answer_locally", (PyCFunction)(void (*)(void))answer_locally, METH_FASTCALL,
     "a queued request the proxy answers itself after all"},
    {"abandon", (PyCFunction)abandon, METH_O, "a queued request never forwarded nor answered"},
    {"match", (PyCFunction)match, METH_O, "the request a response answers, or None to drop it"},
    {"oldest_waiting_ns", (PyCFunction)oldest_waiting_ns, METH_NOARGS, "when the oldest request owed was read"},
    {"awaiting_response", (PyCFunction)awaiting_response, METH_NOARGS, "some forwarded request expects a response"},
    {"_append", (PyCFunction)append_entry, METH_O, "an entry at the end"},
    {"_probe_went", (PyCFunction)probe_went, METH_NOARGS, "the probe is on its way: no other is wanted"},
    {"_last", (PyCFunction)last_entry, METH_NOARGS, "the last entry, or None"},
    {"_pop_last", (PyCFunction)pop_last, METH_NOARGS, "the last entry, out"},
    {NULL},
};

static PyMemberDef queue_members[] = {
    {"local_answers", T_PYSSIZET, offsetof(Queue, local_answers), 0, "local answers not yet handed out"},
    {NULL},
};

static PyGetSetDef queue_getset[] = {
    {"entries", (getter)get_entries, NULL, "the entries (their number, in order)", NULL},
    {"broker_answers_acks0", (getter)get_answers_acks0, (setter)set_answers_acks0,
     "None until known; whether the broker answers acks=0 produces", NULL},
    {"probe_wanted", (getter)get_queue_flag, (setter)set_queue_flag, "an acks=0 request asks for a probe",
     (void *)offsetof(Queue, probe_wanted)},
    {"_probe_sent", (getter)get_queue_flag, (setter)set_queue_flag, "the probe went", (void *)offsetof(Queue, probe_sent)},
    {NULL},
};

static PySequenceMethods queue_sequence = {.sq_length = (lenfunc)queue_length};

PyTypeObject QueueType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "proxy.connection._native.Queue",
    .tp_doc = "Requests in flight, in order (proxy.connection.inflight.PureInFlightQueue's twin, its hot methods).",
    .tp_basicsize = sizeof(Queue),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)queue_init,
    .tp_traverse = (traverseproc)queue_traverse,
    .tp_clear = (inquiry)queue_clear,
    .tp_dealloc = (destructor)queue_dealloc,
    .tp_iter = (getiterfunc)queue_iter,
    .tp_as_sequence = &queue_sequence,
    .tp_methods = queue_methods,
    .tp_members = queue_members,
    .tp_getset = queue_getset,
};

