/* What the frame splitters call at each frame's header: proxy.connection.core's parse_request and parse_response
 * closures, their common case here (a session with no SASL exchange, its frames bounded by the listener's limit) and
 * every other case handed to the closure itself (tests/proxy/connection/test_parsers_native.py compares the two on
 * sessions in every state). The splitter calls it for every frame, without a Python frame for the closure. */

#include "connection.h"

typedef struct {
    PyObject_HEAD
    PyObject *session, *fallback, *parse, *max_bytes, *internal, *pids, *max_header;
    long long limit;  /* max_bytes as a number */
    vectorcallfunc vectorcall;
} HeaderParser;

/* the request limit's name in a too-large frame's error: parse's own default, passed so that every argument goes by
 * position (matching a keyword to a name costs parse about 600 instructions a request) */
static PyObject *SaslName, *RequestLimitName, *EnabledName, *LimitName;

/* HeaderParser(session, fallback, parse, max_bytes, internal=None, producer_ids=None, max_header=None): a request's
 * parser when producer_ids is given (parse(buf, max_bytes, internal or producer_ids.enabled, limit name,
 * max_header) while the session has no SASL exchange and its request limit is max_bytes), a response's otherwise
 * (parse(buf, max_bytes) while the session has no SASL exchange); fallback(buf) in every other case */
static int parser_init(HeaderParser *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"session", "fallback", "parse", "max_bytes", "internal", "producer_ids", "max_header",
                            NULL};
    PyObject *session, *fallback, *parse, *max_bytes, *internal = Py_None, *pids = Py_None, *max_header = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOO|OOO", names, &session, &fallback, &parse, &max_bytes,
                                     &internal, &pids, &max_header))
        return -1;
    if (SaslName == NULL) {
        if ((SaslName = PyUnicode_InternFromString("sasl")) == NULL) return -1;
        if ((RequestLimitName = PyUnicode_InternFromString("request_limit")) == NULL) return -1;
        if ((EnabledName = PyUnicode_InternFromString("enabled")) == NULL) return -1;
        if ((LimitName = PyUnicode_InternFromString("socket.request.max.bytes")) == NULL) return -1;
    }
    long long limit = as_long_long(max_bytes);
    if (limit == -1 && PyErr_Occurred()) return -1;
    PyObject **slots[] = {&self->session, &self->fallback, &self->parse,     &self->max_bytes,
                          &self->internal, &self->pids,    &self->max_header};
    PyObject *values[] = {session, fallback, parse, max_bytes, internal, pids, max_header};
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) Py_XSETREF(*slots[i], Py_NewRef(values[i]));
    self->limit = limit;
    return 0;
}

/* the closure's common case, or the closure */
static PyObject *parser_call(HeaderParser *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "a header parser takes the buffer alone");
        return NULL;
    }
    PyObject *buf = args[0];
    PyObject *sasl = GETATTR(self->session, SaslName);
    if (sasl == NULL) return NULL;
    Py_DECREF(sasl);
    if (sasl != Py_None) return PyObject_CallOneArg(self->fallback, buf); /* a SASL exchange: the closure's */
    if (self->pids == Py_None) { /* a response's */
        PyObject *call[] = {buf, self->max_bytes};
        return PyObject_Vectorcall(self->parse, call, 2, NULL);
    }
    long long limit;
    if (long_attr(self->session, RequestLimitName, &limit) < 0) return NULL;
    if (limit < self->limit) return PyObject_CallOneArg(self->fallback, buf); /* before a SASL authentication */
    PyObject *flag = Py_NewRef(self->internal);
    int internal = PyObject_IsTrue(flag);
    if (internal < 0) {
        Py_DECREF(flag);
        return NULL;
    }
    if (!internal) { /* internal or pids.enabled */
        Py_SETREF(flag, GETATTR(self->pids, EnabledName));
        if (flag == NULL) return NULL;
    }
    PyObject *call[] = {buf, self->max_bytes, flag, LimitName, self->max_header};
    PyObject *header = PyObject_Vectorcall(self->parse, call, 5, NULL);
    Py_DECREF(flag);
    return header;
}

static PyObject *parser_tp_call(HeaderParser *self, PyObject *args, PyObject *kwargs) {
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "a header parser takes the buffer alone");
        return NULL;
    }
    return parser_call(self, &PyTuple_GET_ITEM(args, 0), (size_t)PyTuple_GET_SIZE(args), NULL);
}

static PyObject *parser_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    HeaderParser *self = (HeaderParser *)PyType_GenericNew(type, args, kwargs);
    if (self != NULL) self->vectorcall = (vectorcallfunc)parser_call;
    return (PyObject *)self;
}

static int parser_traverse(HeaderParser *self, visitproc visit, void *arg) {
    Py_VISIT(self->session);
    Py_VISIT(self->fallback);
    Py_VISIT(self->parse);
    Py_VISIT(self->max_bytes);
    Py_VISIT(self->internal);
    Py_VISIT(self->pids);
    Py_VISIT(self->max_header);
    return 0;
}

static int parser_clear(HeaderParser *self) {
    Py_CLEAR(self->session);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->parse);
    Py_CLEAR(self->max_bytes);
    Py_CLEAR(self->internal);
    Py_CLEAR(self->pids);
    Py_CLEAR(self->max_header);
    return 0;
}

static void parser_dealloc(HeaderParser *self) {
    PyObject_GC_UnTrack(self);
    parser_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyTypeObject HeaderParserType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "proxy.connection._native.HeaderParser",
    .tp_basicsize = sizeof(HeaderParser),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "a frame header's parser: the core's closure, its common case in C",
    .tp_new = parser_new,
    .tp_init = (initproc)parser_init,
    .tp_dealloc = (destructor)parser_dealloc,
    .tp_traverse = (traverseproc)parser_traverse,
    .tp_clear = (inquiry)parser_clear,
    .tp_call = (ternaryfunc)parser_tp_call,
    .tp_vectorcall_offset = offsetof(HeaderParser, vectorcall),
};
