/* The module proxy.codec._accel: what configure_* hand over, the method table, PyInit. */

#include "accel.h"

PyObject *ProtocolError, *Incomplete, *RequestHeader, *ResponseHeader, *FlexibleSince;
PyObject *WalkFrame;
PyObject *SkimProgram, *PrefixProgram;
PyObject *SkimPlans, *PrefixPlans;
PyObject *DefaultLimitName;
Slots RequestSlots, ResponseSlots;

/* header.RequestHeader's and ResponseHeader's fields, in order: new_slotted makes them with every one given. */
static const char *const request_fields[] = {"size", "api_key", "api_version", "correlation_id", "client_id",
                                             "header_length", "acks", "producer_ids", "only_topic", "raw",
                                             "topic_count", "replica_id", NULL};
static const char *const response_fields[] = {"size", "correlation_id", "raw", NULL};

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
    if (slots_of(req, request_fields, &RequestSlots) < 0 || slots_of(resp, response_fields, &ResponseSlots) < 0)
        return NULL;
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
    {"configure_splitter", configure_splitter, METH_VARARGS, "the frame splitter's events, actions and error"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_accel", "The codec's hot path in C.", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__accel(void) {
    SkimPlans = PyDict_New();
    PrefixPlans = PyDict_New();
    DefaultLimitName = PyUnicode_InternFromString("socket.request.max.bytes");
    if (SkimPlans == NULL || PrefixPlans == NULL || DefaultLimitName == NULL) return NULL;
    PyObject *created = PyModule_Create(&module);
    if (created == NULL || add_splitter(created) < 0) {
        Py_XDECREF(created);
        return NULL;
    }
    return created;
}
