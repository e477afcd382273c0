/* FetchCap, BudgetTrim, TagRewrite and Chained: proxy.apis.guards' pure classes in C, each calling what it holds as
 * the pure one does, in the same order, so both answer the same (tests/proxy/apis/test_guards_native.py). Each is
 * called through vectorcall, by the request and response loops (requests.c, responses.c) as by Python: no frame. */

#include "connection.h"

static PyObject *RequestWord, *ResponseWord; /* "request", "response": tagged_fields' side */

/* -- what the four share with stages.c's two (connection.h) ------------------------------------------------------------------------------------ */

int guard_traverse(GuardObject *self, visitproc visit, void *arg) {
    for (Py_ssize_t i = 0; i < self->count; i++) Py_VISIT(self->fields[i]);
    return 0;
}

int guard_clear(GuardObject *self) {
    for (Py_ssize_t i = 0; i < self->count; i++) Py_CLEAR(self->fields[i]);
    return 0;
}

void guard_dealloc(GuardObject *self) {
    PyObject_GC_UnTrack(self);
    guard_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyObject *guard_new(PyTypeObject *type, PyObject *args, PyObject *kwds, Py_ssize_t count, vectorcallfunc call,
                    const char *ints) {
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_Format(PyExc_TypeError, "%s() takes positional arguments only", type->tp_name);
        return NULL;
    }
    if (PyTuple_GET_SIZE(args) != count) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", type->tp_name, count,
                     PyTuple_GET_SIZE(args));
        return NULL;
    }
    for (Py_ssize_t i = 0; ints[i]; i++)
        if (ints[i] == 'i' && !PyLong_Check(PyTuple_GET_ITEM(args, i))) {
            PyErr_Format(PyExc_TypeError, "%s(): argument %zd must be an int", type->tp_name, i + 1);
            return NULL;
        }
    GuardObject *self = (GuardObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = call;
    self->count = count;
    for (Py_ssize_t i = 0; i < count; i++) self->fields[i] = Py_NewRef(PyTuple_GET_ITEM(args, i));
    return (PyObject *)self;
}

static int one_argument(PyObject *callable, size_t nargsf, PyObject *kwnames) {
    if (PyVectorcall_NARGS(nargsf) == 1 && kwnames == NULL) return 0;
    PyErr_Format(PyExc_TypeError, "%s() takes one argument, the body", Py_TYPE(callable)->tp_name);
    return -1;
}

/* tagged_fields(api_key, side, version, body): the body's top-level tagged fields, a dict (a new reference). */
static PyObject *tags_of(PyObject *tagged_fields, PyObject *api_key, PyObject *side, PyObject *version, PyObject *body) {
    PyObject *args[4] = {api_key, side, version, body};
    PyObject *tags = PyObject_Vectorcall(tagged_fields, args, 4, NULL);
    if (tags != NULL && !PyDict_Check(tags)) {
        PyErr_SetString(PyExc_TypeError, "tagged_fields did not answer a dict");
        Py_CLEAR(tags);
    }
    return tags;
}

/* body <= floor() (or >): 1, 0, or -1 with an exception set; the floor called, then compared as Python compares. */
static int compare_floor(long long n, PyObject *floor, int op) {
    PyObject *f = PyObject_CallNoArgs(floor);
    if (f == NULL) return -1;
    int answer;
    if (PyFloat_CheckExact(f) && n > -(1LL << 53) && n < (1LL << 53)) {
        double v = PyFloat_AS_DOUBLE(f);
        answer = op == Py_LE ? (double)n <= v : (double)n > v;
    } else {
        PyObject *number = PyLong_FromLongLong(n);
        answer = number == NULL ? -1 : PyObject_RichCompareBool(number, f, op);
        Py_XDECREF(number);
    }
    Py_DECREF(f);
    return answer;
}

/* -- FetchCap(tagged_fields, api_key, version, replica_tag, max_bytes_at, floor, fits, exempt, capped, replica_of) */

enum { FC_TAGGED, FC_API, FC_VERSION, FC_REPLICA_TAG, FC_AT, FC_FLOOR, FC_FITS, FC_EXEMPT, FC_CAPPED, FC_REPLICA_OF };

static PyObject *fetch_cap_call(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    GuardObject *self = (GuardObject *)callable;
    PyObject **f = self->fields, *body = args[0];
    if (one_argument(callable, nargsf, kwnames) < 0) return NULL;
    PyObject *tags = tags_of(f[FC_TAGGED], f[FC_API], RequestWord, f[FC_VERSION], body);
    if (tags == NULL) return NULL;
    int follower = PyDict_Contains(tags, f[FC_REPLICA_TAG]);
    Py_DECREF(tags);
    if (follower < 0) return NULL;
    if (follower) {
        PyObject *replica = PyObject_CallOneArg(f[FC_REPLICA_OF], body), *zero = PyLong_FromLong(0);
        int exempt = replica == NULL || zero == NULL ? -1 : PyObject_RichCompareBool(replica, zero, Py_GE);
        Py_XDECREF(replica);
        Py_XDECREF(zero);
        if (exempt < 0) return NULL;
        if (exempt) return Py_NewRef(f[FC_EXEMPT]);
    }
    Py_buffer view;
    if (PyObject_GetBuffer(body, &view, PyBUF_SIMPLE) < 0) return NULL;
    Py_ssize_t at = PyLong_AsSsize_t(f[FC_AT]);
    if (at < 0 || at + 4 > view.len) { /* never for a body tagged_fields skimmed: struct's error, as the pure one */
        PyBuffer_Release(&view);
        if (!PyErr_Occurred()) {
            PyObject *module = PyImport_ImportModule("struct");
            PyObject *error = module == NULL ? NULL : PyObject_GetAttrString(module, "error");
            if (error != NULL) PyErr_SetString(error, "unpack_from requires a buffer of at least 4 bytes");
            Py_XDECREF(error);
            Py_XDECREF(module);
        }
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)view.buf + at;
    int32_t max_bytes = (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
    PyBuffer_Release(&view);
    int over = compare_floor(max_bytes, f[FC_FLOOR], Py_GT);
    if (over < 0) return NULL;
    if (!over) return Py_NewRef(f[FC_FITS]);
    PyObject *n = PyLong_FromLong(max_bytes);
    if (n == NULL) return NULL;
    PyObject *call[2] = {body, n};
    PyObject *result = PyObject_Vectorcall(f[FC_CAPPED], call, 2, NULL);
    Py_DECREF(n);
    return result;
}

static PyObject *fetch_cap_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    return guard_new(type, args, kwds, 10, fetch_cap_call, ".ii.i");
}

/* -- BudgetTrim(floor, trim) -------------------------------------------------------------------------------- */

static PyObject *budget_trim_call(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    GuardObject *self = (GuardObject *)callable;
    if (one_argument(callable, nargsf, kwnames) < 0) return NULL;
    Py_ssize_t n = PyObject_Length(args[0]);
    if (n < 0) return NULL;
    int fits = compare_floor(n, self->fields[0], Py_LE);
    if (fits < 0) return NULL;
    return fits ? Py_NewRef(Py_None) : PyObject_CallOneArg(self->fields[1], args[0]);
}

static PyObject *budget_trim_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    return guard_new(type, args, kwds, 2, budget_trim_call, "");
}

/* -- TagRewrite(tagged_fields, api_key, version, tag, rewrite) ---------------------------------------------- */

static PyObject *tag_rewrite_call(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    GuardObject *self = (GuardObject *)callable;
    PyObject **f = self->fields;
    if (one_argument(callable, nargsf, kwnames) < 0) return NULL;
    PyObject *tags = tags_of(f[0], f[1], ResponseWord, f[2], args[0]);
    if (tags == NULL) return NULL;
    PyObject *where = PyDict_GetItemWithError(tags, f[3]); /* borrowed */
    PyObject *result = NULL;
    if (where != NULL) {
        PyObject *call[2] = {args[0], where};
        result = PyObject_Vectorcall(f[4], call, 2, NULL);
    } else if (!PyErr_Occurred()) {
        result = Py_NewRef(Py_None);
    }
    Py_DECREF(tags);
    return result;
}

static PyObject *tag_rewrite_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    return guard_new(type, args, kwds, 5, tag_rewrite_call, ".ii");
}

/* -- Chained(first, second) --------------------------------------------------------------------------------- */

static PyObject *chained_call(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    GuardObject *self = (GuardObject *)callable;
    if (one_argument(callable, nargsf, kwnames) < 0) return NULL;
    PyObject *rewritten = PyObject_CallOneArg(self->fields[0], args[0]);
    if (rewritten == NULL) return NULL;
    PyObject *view = rewritten == Py_None ? Py_NewRef(args[0]) : PyMemoryView_FromObject(rewritten);
    PyObject *again = view == NULL ? NULL : PyObject_CallOneArg(self->fields[1], view);
    Py_XDECREF(view);
    if (again == NULL) {
        Py_DECREF(rewritten);
        return NULL;
    }
    if (again != Py_None) {
        Py_DECREF(rewritten);
        return again;
    }
    Py_DECREF(again);
    return rewritten;
}

static PyObject *chained_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    return guard_new(type, args, kwds, 2, chained_call, "");
}

/* -- the types ---------------------------------------------------------------------------------------------- */

GUARD_TYPE(FetchCap, "proxy.apis.guards.PureFetchCap in C", fetch_cap_new);
GUARD_TYPE(BudgetTrim, "proxy.apis.guards.PureBudgetTrim in C", budget_trim_new);
GUARD_TYPE(TagRewrite, "proxy.apis.guards.PureTagRewrite in C", tag_rewrite_new);
GUARD_TYPE(Chained, "proxy.apis.guards.PureChained in C", chained_new);

int add_guards(PyObject *module) {
    RequestWord = PyUnicode_InternFromString("request");
    ResponseWord = PyUnicode_InternFromString("response");
    if (RequestWord == NULL || ResponseWord == NULL) return -1;
    PyTypeObject *types[] = {&FetchCap, &BudgetTrim, &TagRewrite, &Chained};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (PyType_Ready(types[i]) < 0 || PyModule_AddObjectRef(module, types[i]->tp_name + 25, (PyObject *)types[i]) < 0)
            return -1;
    return 0;
}
