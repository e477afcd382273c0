/* proxy.codec.frame.FrameSplitter in C: the pull parser of a connection's frames, state for state the pure class
 * (PureFrameSplitter) it mirrors: the same events, the same values (slices of the chunk received, a bytearray for a
 * buffered frame), the same errors with the same messages (tests/proxy/codec/test_splitter_differential.py).
 *
 * Like the pure class it keeps a reference to the chunk it was given and reads its bytes only to copy a buffered
 * frame or a straddling prefix (a buffer view taken and released at once: no export outlives the call). */

#include "accel.h"

#include <structmember.h>

/* What frame.py hands over (configure_splitter): its Event and Action members, SplitterError, the empty chunk. */
static PyObject *NeedData, *Boundary, *HeaderEvent, *Segment, *LastSegment, *FrameEvent, *EndEvent;
static PyObject *Stream, *Buffer, *Drop, *Stop;
static PyObject *SplitterError, *Nothing, *SizeName;

enum { S_IDLE, S_PREFIX, S_ACTING, S_HEAD, S_BODY, S_WHOLE, S_END, S_STOPPED, S_COPIED };
#define PREFIX_STEP 512 /* bytes copied at a time while a straddling prefix is incomplete */

typedef struct {
    PyObject_HEAD
    PyObject *parse;
    PyObject *data; /* the chunk received last, until it is used up (Nothing then) */
    Py_ssize_t pos, n;
    PyObject *pending; /* a bytearray: a prefix straddling chunks, or a whole BUFFER frame */
    Py_ssize_t remaining;
    PyObject *action;
    PyObject *header;
    PyObject *value;
    int state, gated, allowed;
    Py_ssize_t parse_at;
} Splitter;

static void set(PyObject **slot, PyObject *value) { /* steals nothing: value is borrowed (NULL allowed) */
    PyObject *old = *slot;
    Py_XINCREF(value);
    *slot = value;
    Py_XDECREF(old);
}

static void put(PyObject **slot, PyObject *value) { /* steals value */
    PyObject *old = *slot;
    *slot = value;
    Py_XDECREF(old);
}

static PyObject *splitter_error(const char *message) {
    PyErr_SetString(SplitterError, message);
    return NULL;
}

/* data[start:stop]; data itself where that slice is all of a memoryview or bytes (n, its length): equal, of the same
 * type, over the same bytes, without a new view (a bytearray is always sliced: its slice is a copy) */
static PyObject *slice_of(PyObject *data, Py_ssize_t start, Py_ssize_t stop, Py_ssize_t n) {
    if (start == 0 && stop == n && (PyMemoryView_Check(data) || PyBytes_CheckExact(data))) return Py_NewRef(data);
    PyObject *a = PyLong_FromSsize_t(start), *b = PyLong_FromSsize_t(stop), *s = NULL, *out = NULL;
    if (a != NULL && b != NULL) s = PySlice_New(a, b, NULL);
    if (s != NULL) out = PyObject_GetItem(data, s);
    Py_XDECREF(a);
    Py_XDECREF(b);
    Py_XDECREF(s);
    return out;
}

/* pending += data[start:stop] */
static int append(PyObject *pending, PyObject *data, Py_ssize_t start, Py_ssize_t stop) {
    if (stop <= start) return 0;
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) return -1;
    Py_ssize_t have = PyByteArray_GET_SIZE(pending);
    int rc = PyByteArray_Resize(pending, have + (stop - start));
    if (rc == 0) memcpy(PyByteArray_AS_STRING(pending) + have, (const char *)view.buf + start, stop - start);
    PyBuffer_Release(&view);
    return rc;
}

static PyObject *used_up(Splitter *self) {
    set(&self->data, Nothing);
    set(&self->value, NULL);
    return Py_NewRef(NeedData);
}

/* value = pending, and a new empty pending: what was gathered is handed out (a buffered frame, a straddled prefix) */
static int hand_out_pending(Splitter *self) {
    PyObject *fresh = PyByteArray_FromStringAndSize(NULL, 0);
    if (fresh == NULL) return -1;
    put(&self->value, self->pending);
    self->pending = fresh;
    return 0;
}

static PyObject *whole(Splitter *self) {
    if (hand_out_pending(self) < 0) return NULL;
    return Py_NewRef(FrameEvent);
}

static int whole_frame(PyObject *pending) {
    Py_ssize_t have = PyByteArray_GET_SIZE(pending);
    return have >= 4 && have >= (Py_ssize_t)be32((const unsigned char *)PyByteArray_AS_STRING(pending)) + 4;
}

static Py_ssize_t prefix_room(PyObject *pending, Py_ssize_t available) {
    Py_ssize_t have = PyByteArray_GET_SIZE(pending);
    if (have < 4) return 4 - have < available ? 4 - have : available;
    Py_ssize_t size = (Py_ssize_t)be32((const unsigned char *)PyByteArray_AS_STRING(pending));
    Py_ssize_t room = size + 4 - have;
    if (available < room) room = available;
    Py_ssize_t step = have > PREFIX_STEP ? have : PREFIX_STEP;
    if (step < room) room = step;
    return room > 0 ? room : 0;
}

/* The prefix of the frame starting here did not parse from what this chunk holds: gather it across chunks. */
static PyObject *straddled(Splitter *self) {
    PyObject *data = self->data, *pending = self->pending;
    Py_ssize_t pos = self->pos, n = self->n;
    if (PyByteArray_GET_SIZE(pending) == 0) {
        Py_ssize_t take = n - pos;
        if (take >= 4) {
            Py_buffer view;
            if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) return NULL;
            Py_ssize_t size = (Py_ssize_t)be32((const unsigned char *)view.buf + pos) + 4;
            PyBuffer_Release(&view);
            if (size < take) take = size;
        }
        if (append(pending, data, pos, pos + take) < 0) return NULL; /* nothing for a take below 1 */
        pos += take;
        if (whole_frame(pending)) return PE_FORMAT("frame ends inside its header");
        self->parse_at = 2 * PyByteArray_GET_SIZE(pending);
    }
    for (;;) {
        if (pos == n) {
            self->pos = pos;
            self->state = S_PREFIX;
            return used_up(self);
        }
        Py_ssize_t take = prefix_room(pending, n - pos);
        if (append(pending, data, pos, pos + take) < 0) return NULL;
        pos += take;
        int whole_now = whole_frame(pending);
        if (PyByteArray_GET_SIZE(pending) < self->parse_at && !whole_now) continue;
        PyObject *header = PyObject_CallOneArg(self->parse, pending);
        if (header == NULL) {
            if (!PyErr_ExceptionMatches(Incomplete)) return NULL;
            PyErr_Clear();
            if (whole_now) return PE_FORMAT("frame ends inside its header");
            self->parse_at = 2 * PyByteArray_GET_SIZE(pending);
            continue;
        }
        self->parse_at = 0;
        self->pos = pos;
        put(&self->header, header);
        self->state = S_ACTING;
        return Py_NewRef(HeaderEvent);
    }
}

static PyObject *next_event(Splitter *self, PyObject *unused) {
    CONFIGURED(NeedData)
    switch (self->state) {
    case S_IDLE: {
        if (self->pos == self->n) return used_up(self);
        if (self->gated && !self->allowed) {
            self->allowed = 1;
            return Py_NewRef(Boundary);
        }
        self->allowed = 0;
        PyObject *rest = slice_of(self->data, self->pos, self->n, self->n);
        if (rest == NULL) return NULL;
        PyObject *header = PyObject_CallOneArg(self->parse, rest);
        Py_DECREF(rest);
        if (header == NULL) {
            if (!PyErr_ExceptionMatches(Incomplete)) return NULL;
            PyErr_Clear();
            set(&self->header, NULL);
            return straddled(self);
        }
        put(&self->header, header);
        self->state = S_ACTING;
        return Py_NewRef(HeaderEvent);
    }
    case S_COPIED:
        self->state = S_IDLE;
        return Py_NewRef(FrameEvent);
    case S_BODY: {
        Py_ssize_t pos = self->pos, n = self->n;
        if (pos == n) return used_up(self);
        Py_ssize_t remaining = self->remaining;
        Py_ssize_t end = remaining < n - pos ? pos + remaining : n;
        self->pos = end;
        self->remaining = remaining = remaining - (end - pos);
        PyObject *action = self->action;
        if (action == Stream) {
            PyObject *segment = slice_of(self->data, pos, end, n);
            if (segment == NULL) return NULL;
            put(&self->value, segment);
            if (remaining) return Py_NewRef(Segment);
            self->state = S_IDLE;
            return Py_NewRef(LastSegment);
        }
        if (remaining) {
            if (action == Buffer && append(self->pending, self->data, pos, end) < 0) return NULL;
            return used_up(self);
        }
        self->state = S_IDLE;
        if (action == Buffer) {
            if (append(self->pending, self->data, pos, end) < 0) return NULL;
            return whole(self);
        }
        return Py_NewRef(EndEvent);
    }
    case S_END:
        self->state = S_IDLE;
        return Py_NewRef(EndEvent);
    case S_HEAD:
        if (self->remaining) {
            self->state = S_BODY;
            return Py_NewRef(Segment);
        }
        self->state = S_IDLE;
        return Py_NewRef(LastSegment);
    case S_WHOLE:
        self->state = S_IDLE;
        return whole(self);
    case S_PREFIX:
        return straddled(self);
    case S_ACTING:
        return splitter_error("pulled again before the header was acted on");
    default: /* stopped: what was received is ignored */
        self->pos = self->n;
        return used_up(self);
    }
}

static PyObject *close_splitter(Splitter *self, PyObject *unused) {
    PyObject *fresh = PyByteArray_FromStringAndSize(NULL, 0);
    if (fresh == NULL) return NULL;
    self->state = S_STOPPED;
    put(&self->pending, fresh);
    set(&self->data, Nothing);
    self->pos = self->n = self->remaining = 0;
    set(&self->header, Py_None);
    set(&self->value, Py_None);
    Py_RETURN_NONE;
}

static PyObject *receive(Splitter *self, PyObject *data) {
    CONFIGURED(NeedData)
    if (self->pos < self->n) return splitter_error("bytes received before the last chunk was used");
    Py_ssize_t n = PyObject_Length(data);
    if (n < 0) return NULL;
    set(&self->data, data);
    self->pos = 0;
    self->n = n;
    Py_RETURN_NONE;
}

static PyObject *take_rest(Splitter *self, PyObject *unused) {
    if (self->state != S_IDLE) return splitter_error("bytes taken back in the middle of a frame");
    PyObject *rest = slice_of(self->data, self->pos, self->n, self->n);
    if (rest == NULL) return NULL;
    self->pos = self->n;
    self->allowed = 0;
    PyObject *need = used_up(self);
    Py_DECREF(need);
    return rest;
}

/* header.size as the generic attribute access reads it, from its slot where the header's type keeps it in one (a
 * __slots__ member, as both kinds of header do: about 160 instructions less than by name). Two entries, one for each
 * kind of header a process's splitters see; each holds a type (borrowed: compared, never dereferenced unless its
 * version tag matches), its version tag and the slot's offset. Every other case goes by name. */
typedef struct {
    PyTypeObject *type;
    unsigned int version;
    Py_ssize_t offset;
} SizeSlot;

static PyObject *header_size(PyObject *header) {
    static SizeSlot slots[2];
    PyTypeObject *type = Py_TYPE(header);
    for (int i = 0; i < 2; i++) {
        SizeSlot *slot = &slots[i];
        if (slot->type == type && slot->version == type->tp_version_tag) {
            PyObject *value = *(PyObject **)((char *)header + slot->offset);
            if (value != NULL) return Py_NewRef(value);
            break; /* unset: the access by name raises as it does */
        }
    }
    if (type->tp_getattro == PyObject_GenericGetAttr) {
        PyObject *descr = _PyType_Lookup(type, SizeName); /* borrowed; gives the type a version tag */
        if (descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type) &&
            PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG)) {
            PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
            if (member->type == T_OBJECT_EX && !(member->flags & PY_AUDIT_READ)) {
                SizeSlot *slot = &slots[slots[0].type != NULL && slots[0].type != type];
                *slot = (SizeSlot){type, type->tp_version_tag, member->offset};
            }
        }
    }
    return PyObject_GetAttr(header, SizeName);
}

static PyObject *act(Splitter *self, PyObject *action) {
    if (self->state != S_ACTING) return splitter_error("an action given with no header waiting for one");
    if (action == Stop) return close_splitter(self, NULL);
    set(&self->action, action);
    /* the frame's length: its size and the 4 size bytes (header.frame_length, a property: read as its slot) */
    PyObject *size_obj = header_size(self->header);
    if (size_obj == NULL) return NULL;
    Py_ssize_t size = PyLong_AsSsize_t(size_obj);
    Py_DECREF(size_obj);
    if (size == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t length = size + 4;
    Py_ssize_t remaining;
    Py_ssize_t have = PyByteArray_GET_SIZE(self->pending);
    if (have) { /* the prefix straddled chunks: those bytes are here, not in the chunk */
        self->remaining = remaining = length - have;
        if (action == Stream) {
            if (hand_out_pending(self) < 0) return NULL;
            self->state = S_HEAD;
            Py_RETURN_NONE;
        }
        if (action == Drop && PyByteArray_Resize(self->pending, 0) < 0) return NULL;
    } else if (action == Buffer && self->pos + length <= self->n) { /* the whole frame is here: one copy */
        Py_ssize_t pos = self->pos;
        PyObject *frame = PyByteArray_FromStringAndSize(NULL, 0);
        if (frame == NULL) return NULL;
        if (append(frame, self->data, pos, pos + length) < 0) {
            Py_DECREF(frame);
            return NULL;
        }
        put(&self->value, frame);
        self->pos = pos + length;
        self->state = S_COPIED;
        Py_RETURN_NONE;
    } else {
        self->remaining = remaining = length;
    }
    self->state = remaining ? S_BODY : action == Buffer ? S_WHOLE : S_END;
    Py_RETURN_NONE;
}

static Py_ssize_t streaming_of(Splitter *self) {
    if (self->state == S_BODY && self->action == Stream && self->pos == self->n) return self->remaining;
    return 0;
}

static PyObject *passed(Splitter *self, PyObject *arg) {
    Py_ssize_t nbytes = PyLong_AsSsize_t(arg);
    if (nbytes == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t streaming = streaming_of(self);
    if (nbytes < 0 || nbytes > streaming)
        return PE_FORMAT("%zd bytes passed with %zd of a streamed frame to come", nbytes, streaming);
    if (!nbytes) Py_RETURN_NONE;
    self->remaining -= nbytes;
    if (!self->remaining) self->state = S_END;
    Py_RETURN_NONE;
}

static PyObject *get_streaming(Splitter *self, void *unused) { return PyLong_FromSsize_t(streaming_of(self)); }
static PyObject *get_remaining(Splitter *self, void *unused) { return PyLong_FromSsize_t(self->remaining); }
static PyObject *get_stopped(Splitter *self, void *unused) { return PyBool_FromLong(self->state == S_STOPPED); }
static PyObject *get_boundary(Splitter *self, void *unused) {
    return PyBool_FromLong(self->state == S_IDLE || self->state == S_STOPPED);
}

static int init(Splitter *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"parse_prefix", "gated", NULL};
    PyObject *parse;
    int gated = 0;
    if (NeedData == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "proxy.codec._accel is used through proxy.codec.accel");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$p", names, &parse, &gated)) return -1;
    PyObject *pending = PyByteArray_FromStringAndSize(NULL, 0);
    if (pending == NULL) return -1;
    set(&self->parse, parse);
    set(&self->data, Nothing);
    put(&self->pending, pending);
    set(&self->action, Stream);
    set(&self->header, Py_None);
    set(&self->value, Py_None);
    self->gated = gated;
    self->pos = self->n = self->remaining = self->parse_at = 0;
    self->state = S_IDLE;
    self->allowed = 0;
    return 0;
}

static int traverse(Splitter *self, visitproc visit, void *arg) {
    Py_VISIT(self->parse);
    Py_VISIT(self->data);
    Py_VISIT(self->pending);
    Py_VISIT(self->action);
    Py_VISIT(self->header);
    Py_VISIT(self->value);
    return 0;
}

static int clear(Splitter *self) {
    Py_CLEAR(self->parse);
    Py_CLEAR(self->data);
    Py_CLEAR(self->pending);
    Py_CLEAR(self->action);
    Py_CLEAR(self->header);
    Py_CLEAR(self->value);
    return 0;
}

static void dealloc(Splitter *self) {
    PyObject_GC_UnTrack(self);
    clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef splitter_methods[] = {
    {"next_event", (PyCFunction)next_event, METH_NOARGS, "The next event of what was received."},
    {"receive", (PyCFunction)receive, METH_O, "The next chunk: pull its events until NEED_DATA."},
    {"act", (PyCFunction)act, METH_O, "What to do with the frame whose HEADER was just handed out."},
    {"take_rest", (PyCFunction)take_rest, METH_NOARGS, "At a BOUNDARY: the bytes not split, given back."},
    {"passed", (PyCFunction)passed, METH_O, "Bytes of the streamed frame moved without being received here."},
    {"close", (PyCFunction)close_splitter, METH_NOARGS, "Nothing more is split."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef splitter_members[] = {
    {"header", T_OBJECT, offsetof(Splitter, header), 0, "the current frame's header (from HEADER to END)"},
    {"value", T_OBJECT, offsetof(Splitter, value), 0, "what the last SEGMENT or FRAME event handed out"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef splitter_getset[] = {
    {"streaming", (getter)get_streaming, NULL, "bytes of the STREAM frame not yet seen, all received handed out"},
    {"remaining", (getter)get_remaining, NULL, "bytes of the current frame not yet seen"},
    {"stopped", (getter)get_stopped, NULL, "nothing more is split"},
    {"at_frame_boundary", (getter)get_boundary, NULL, "between frames (or stopped)"},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject SplitterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "proxy.codec._accel.FrameSplitter",
    .tp_basicsize = sizeof(Splitter),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "proxy.codec.frame.FrameSplitter in C",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)init,
    .tp_dealloc = (destructor)dealloc,
    .tp_traverse = (traverseproc)traverse,
    .tp_clear = (inquiry)clear,
    .tp_methods = splitter_methods,
    .tp_members = splitter_members,
    .tp_getset = splitter_getset,
};

PyObject *configure_splitter(PyObject *self, PyObject *args) {
    PyObject *events, *actions, *error, *nothing;
    if (!PyArg_ParseTuple(args, "O!O!OO", &PyTuple_Type, &events, &PyTuple_Type, &actions, &error, &nothing))
        return NULL;
    if (PyTuple_GET_SIZE(events) != 7 || PyTuple_GET_SIZE(actions) != 4) {
        PyErr_SetString(PyExc_ValueError, "configure_splitter: 7 events and 4 actions");
        return NULL;
    }
    PyObject **e[] = {&NeedData, &Boundary, &HeaderEvent, &Segment, &LastSegment, &FrameEvent, &EndEvent};
    for (int i = 0; i < 7; i++) set(e[i], PyTuple_GET_ITEM(events, i));
    PyObject **a[] = {&Stream, &Buffer, &Drop, &Stop};
    for (int i = 0; i < 4; i++) set(a[i], PyTuple_GET_ITEM(actions, i));
    set(&SplitterError, error);
    set(&Nothing, nothing);
    Py_RETURN_NONE;
}

int add_splitter(PyObject *module) {
    SizeName = PyUnicode_InternFromString("size");
    if (SizeName == NULL || PyType_Ready(&SplitterType) < 0) return -1;
    Py_INCREF(&SplitterType);
    if (PyModule_AddObject(module, "FrameSplitter", (PyObject *)&SplitterType) < 0) {
        Py_DECREF(&SplitterType);
        return -1;
    }
    return 0;
}
