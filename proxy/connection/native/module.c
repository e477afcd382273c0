/* The module proxy.connection._native: its types and configure(), which proxy.connection.compiled calls once, at
 * import, with the Python objects the parts compare with and raise. */

#include "connection.h"

#include <time.h>

PyObject *NoLeg, *ProtocolError, *NoUsageRecorder, *Pass, *NoUsage, *Four, *ResponseText;
PyObject *ResponseHeaderLength, *TaggedFields;
PyObject *EvHeader, *EvFrame, *EvNeedData, *EvLastSegment, *EvSegment, *EvBoundary;
PyObject *ActStream, *ActBuffer, *ActDrop;
PyObject *ForwardRequestClass, *ForwardDecision;
PyObject *AcksName, *CorrelationIdName, *RawName, *SizeName, *ApiKeyName, *LookupName, *ResponseName, *AnsweredName,
    *SendReadyLocalName, *FrameName, *NextEventName, *ActName, *HeaderName, *ValueName, *StreamingName, *InflightName,
    *RequestName, *UsageName, *ActionName, *LocalResponseName, *ExpectsResponseName, *LegName, *AbandonName,
    *ThrottleName, *ThrottleMethodName, *FrameEndedName, *ProbeName, *UnheardName, *MaxInflightName, *StartFrameName,
    *TakeRestName, *RewriteAloneName, *UnlessTaggedName, *ApiVersionName, *DecideName, *HeaderLengthName, *ThenName,
    *UndecidableName, *BodyName, *ActMethodName, *ObserveName, *SettleName, *AccountedName, *RecordResponseName,
    *RewriteName, *ChargedName, *MidFrameName, *HeldName;

/* configure(no_leg, protocol_error, no_usage_recorder, pass_, no_usage, header, frame, need_data,
 * last_segment, segment, boundary, stream, buffer, drop, response_header_length, tagged_fields, api_metrics_class,
 * latency_buckets, forward_request, forward) */
static PyObject *configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    PyObject **slots[] = {&NoLeg,         &ProtocolError, &NoUsageRecorder, &Pass,
                          &NoUsage,       &EvHeader,      &EvFrame,         &EvNeedData, &EvLastSegment,
                          &EvSegment,     &EvBoundary,    &ActStream,       &ActBuffer, &ActDrop,
                          &ResponseHeaderLength, &TaggedFields};
    /* ... then api_metrics_class and latency_buckets (counts.c's), then: */
    PyObject **more[] = {&ForwardRequestClass, &ForwardDecision};
    Py_ssize_t m = (Py_ssize_t)(sizeof more / sizeof more[0]);
    Py_ssize_t n = (Py_ssize_t)(sizeof slots / sizeof slots[0]);
    if (nargs != n + 2 + m) {
        PyErr_Format(PyExc_TypeError, "configure() takes %zd arguments (%zd given)", n + 2 + m, nargs);
        return NULL;
    }
    if (!PyType_Check(args[n + 2])) {
        PyErr_SetString(PyExc_TypeError, "configure(): forward_request is not a class");
        return NULL;
    }
    if (counts_configure(args[n], args[n + 1]) < 0) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_INCREF(args[i]);
        Py_XSETREF(*slots[i], args[i]);
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        Py_INCREF(args[n + 2 + i]);
        Py_XSETREF(*more[i], args[n + 2 + i]);
    }
    Py_RETURN_NONE;
}

/* configure_shell(throttled_read_bytes, splice_min_bytes, bound_changed): the sizes the shell compares with, and
 * Counted.bound_changed, which it does inline */
static PyObject *configure_shell(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "configure_shell() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    if (shell_configure(args[0], args[1], args[2]) < 0) return NULL;
    Py_RETURN_NONE;
}

/* bound_changed(counted, now): what the shell does for counted.bound_changed(now) (tests) */
static PyObject *bound_changed(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "bound_changed() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    return counted_bound_changed(args[0], args[1]);
}

/* What the generic attribute access finds for ``name`` in ``type``'s MRO when reading it (writing, with ``writing``),
 * set in ``cache`` when it is a data descriptor of a kind read or written without the lookup: a member (an object slot
 * at its offset; reading, a member of another kind through its PyMemberDef) or a getset with a getter (setter). None of
 * them when the type has its own __getattribute__ (__setattr__), or the descriptor is anything else. */
static void describe(PyTypeObject *type, PyObject *name, AttrCache *cache, int writing) {
    cache->offset = 0;
    cache->get = NULL;
    cache->set = NULL;
    cache->closure = NULL;
    cache->member = NULL;
    if (writing ? type->tp_setattro != PyObject_GenericSetAttr : type->tp_getattro != PyObject_GenericGetAttr) return;
    if (!PyUnicode_CheckExact(name)) return;
    PyObject *descr = _PyType_Lookup(type, name); /* borrowed; gives the type a version tag */
    if (descr == NULL) return;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (writing) {
            if (member->type == T_OBJECT_EX && member->flags == 0) cache->offset = member->offset;
        } else if (member->type == T_OBJECT_EX && (member->flags & ~READONLY) == 0) {
            cache->offset = member->offset;
        } else if ((member->flags & ~READONLY) == 0) {
            cache->member = member;
        }
    } else if (Py_IS_TYPE(descr, &PyGetSetDescr_Type)) {
        PyGetSetDef *getset = ((PyGetSetDescrObject *)descr)->d_getset;
        if (writing) cache->set = getset->set;
        else cache->get = getset->get;
        cache->closure = getset->closure;
    }
}

static void fill(PyObject *object, PyObject *name, AttrCache *cache, int writing) {
    PyTypeObject *type = Py_TYPE(object);
    describe(type, name, cache, writing);
    cache->type = NULL;
    if (type->tp_version_tag == 0) return; /* no version to check against: read by name each time */
    cache->version = type->tp_version_tag;
    cache->name = name;
    cache->type = type;
}

PyObject *attr_fill(PyObject *object, PyObject *name, AttrCache *cache) {
    fill(object, name, cache, 0);
    return PyObject_GetAttr(object, name);
}

int setattr_fill(PyObject *object, PyObject *name, PyObject *value, AttrCache *cache) {
    if (value != NULL) fill(object, name, cache, 1);
    return PyObject_SetAttr(object, name, value);
}

void method_fill(PyObject *self, PyObject *name, MethodCache *cache) {
    PyTypeObject *type = Py_TYPE(self);
    PyObject *method = NULL;
    cache->type = NULL;
    cache->method = NULL;
    int own_dict = type->tp_dictoffset != 0;
#ifdef Py_TPFLAGS_MANAGED_DICT
    own_dict = own_dict || PyType_HasFeature(type, Py_TPFLAGS_MANAGED_DICT);
#endif
    if (type->tp_getattro == PyObject_GenericGetAttr && !own_dict && PyUnicode_CheckExact(name)) {
        PyObject *found = _PyType_Lookup(type, name); /* borrowed; gives the type a version tag */
        if (found != NULL && PyType_HasFeature(Py_TYPE(found), Py_TPFLAGS_METHOD_DESCRIPTOR)) method = found;
    }
    if (type->tp_version_tag == 0) return; /* no version to check against: called by name each time */
    cache->version = type->tp_version_tag;
    cache->name = name;
    cache->method = method;
    cache->type = type;
}

/* method_probe(object, name, *args): one call site of call_method, for the same tests (up to three arguments). */
static PyObject *method_probe(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 2 || nargs > 5 || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "method_probe(object, name, *up_to_three_arguments)");
        return NULL;
    }
    PyObject *a = nargs > 2 ? args[2] : NULL, *b = nargs > 3 ? args[3] : NULL, *c = nargs > 4 ? args[4] : NULL;
    return call_method(args[1], args[0], a, b, c, nargs - 1);
}

/* attr_probe(object, name) and setattr_probe(object, name, value): one call site each of GETATTR and SETATTR, for
 * tests/proxy/connection/test_attr_cache_native.py (its cache lives as long as the module, as the paths' do). */
static PyObject *attr_probe(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "attr_probe(object, name)");
        return NULL;
    }
    return GETATTR(args[0], args[1]);
}

static PyObject *setattr_probe(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "setattr_probe(object, name, value)");
        return NULL;
    }
    return SETATTR(args[0], args[1], args[2]) < 0 ? NULL : Py_NewRef(Py_None);
}

/* proxy.ground.clock.SystemClock.now_ms: time.monotonic_ns() // 1_000_000 (CLOCK_MONOTONIC, as CPython reads it on
 * Linux and the BSDs), without the frame of a Python method: a quota manager reads it at every record. */
static PyObject *monotonic_ms(PyObject *module, PyObject *unused) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return PyErr_SetFromErrno(PyExc_OSError);
    return PyLong_FromLongLong((long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/* view_probe(frame, start): view_from (connection.h), for tests/proxy/connection/test_view_from_native.py */
static PyObject *view_probe(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "view_probe(frame, start)");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    return view_from(args[0], start);
}

static PyMethodDef module_methods[] = {
    {"view_probe", (PyCFunction)(void (*)(void))view_probe, METH_FASTCALL, "view_from (tests)"},
    {"attr_probe", (PyCFunction)(void (*)(void))attr_probe, METH_FASTCALL, "GETATTR at one call site (tests)"},
    {"method_probe", (PyCFunction)(void (*)(void))method_probe, METH_FASTCALL, "call_method at one site (tests)"},
    {"setattr_probe", (PyCFunction)(void (*)(void))setattr_probe, METH_FASTCALL, "SETATTR at one call site (tests)"},
    {"monotonic_ms", monotonic_ms, METH_NOARGS, "time.monotonic_ns() // 1_000_000 (proxy.ground.clock)"},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "the objects the hot path compares with and raises (proxy.connection.compiled hands them over at import)"},
    {"configure_shell", (PyCFunction)(void (*)(void))configure_shell, METH_FASTCALL,
     "the sizes the shell compares with and Counted.bound_changed (proxy.connection.shell hands them over)"},
    {"bound_changed", (PyCFunction)(void (*)(void))bound_changed, METH_FASTCALL,
     "counted.bound_changed(now) as the shell does it (tests)"},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "The connection's per-request hot path in C (proxy.connection.compiled chooses it or the pure Python).", -1,
    module_methods,
};

static int intern(PyObject **slot, const char *name) {
    *slot = PyUnicode_InternFromString(name);
    return *slot == NULL ? -1 : 0;
}

PyMODINIT_FUNC PyInit__native(void) {
    if (intern(&AcksName, "acks") < 0 || intern(&CorrelationIdName, "correlation_id") < 0 ||
        intern(&RawName, "raw") < 0 || intern(&SizeName, "size") < 0 || intern(&ApiKeyName, "api_key") < 0 ||
        intern(&LookupName, "lookup") < 0 || intern(&ResponseName, "response") < 0 ||
        intern(&AnsweredName, "answered") < 0 || intern(&SendReadyLocalName, "send_ready_local") < 0 ||
        intern(&FrameName, "frame") < 0 || intern(&NextEventName, "next_event") < 0 || intern(&ActName, "act") < 0 ||
        intern(&HeaderName, "header") < 0 || intern(&ValueName, "value") < 0 ||
        intern(&StreamingName, "streaming") < 0 || intern(&InflightName, "inflight") < 0 ||
        intern(&RequestName, "request") < 0 || intern(&UsageName, "usage") < 0 || intern(&ActionName, "action") < 0 ||
        intern(&LocalResponseName, "local_response") < 0 ||
        intern(&ExpectsResponseName, "expects_response") < 0 || intern(&LegName, "leg") < 0 ||
        intern(&AbandonName, "abandon") < 0 || intern(&ThrottleName, "throttle") < 0 ||
        intern(&ThrottleMethodName, "_throttle") < 0 || intern(&FrameEndedName, "frame_ended") < 0 ||
        intern(&ProbeName, "probe") < 0 || intern(&UnheardName, "unheard") < 0 ||
        intern(&MaxInflightName, "max_inflight") < 0 || intern(&StartFrameName, "start_frame") < 0 ||
        intern(&TakeRestName, "take_rest") < 0 || intern(&RewriteAloneName, "rewrite_alone") < 0 ||
        intern(&UnlessTaggedName, "unless_tagged") < 0 || intern(&ApiVersionName, "api_version") < 0 ||
        intern(&ResponseText, "response") < 0 || intern(&DecideName, "decide") < 0 ||
        intern(&HeaderLengthName, "header_length") < 0 || intern(&ThenName, "then") < 0 ||
        intern(&UndecidableName, "_undecidable") < 0 || intern(&BodyName, "body") < 0 ||
        intern(&ActMethodName, "_act") < 0 || intern(&ObserveName, "observe") < 0 ||
        intern(&SettleName, "settle") < 0 || intern(&AccountedName, "accounted") < 0 ||
        intern(&RecordResponseName, "record_response") < 0 || intern(&RewriteName, "rewrite") < 0 ||
        intern(&ChargedName, "_charged") < 0 || intern(&MidFrameName, "_mid_frame") < 0 ||
        intern(&HeldName, "_held") < 0)
        return NULL;
    Four = PyLong_FromLong(4);
    if (Four == NULL) return NULL;
    if (PyType_Ready(&EntryType) < 0 || PyType_Ready(&QueueType) < 0 || PyType_Ready(&ResponsesType) < 0 ||
        PyType_Ready(&RequestsType) < 0 || PyType_Ready(&WriteBatchType) < 0 || PyType_Ready(&DirectWriteType) < 0 ||
        PyType_Ready(&PlannerType) < 0 || PyType_Ready(&ShellType) < 0 ||
        PyType_Ready(&HeaderParserType) < 0)
        return NULL;
    PyObject *created = PyModule_Create(&module);
    if (created == NULL) return NULL;
    if (PyModule_AddObjectRef(created, "InFlight", (PyObject *)&EntryType) < 0 ||
        PyModule_AddObjectRef(created, "Queue", (PyObject *)&QueueType) < 0 ||
        PyModule_AddObjectRef(created, "Responses", (PyObject *)&ResponsesType) < 0 ||
        PyModule_AddObjectRef(created, "Requests", (PyObject *)&RequestsType) < 0 ||
        PyModule_AddObjectRef(created, "WriteBatch", (PyObject *)&WriteBatchType) < 0 ||
        PyModule_AddObjectRef(created, "DirectWrite", (PyObject *)&DirectWriteType) < 0 ||
        PyModule_AddObjectRef(created, "Planner", (PyObject *)&PlannerType) < 0 ||
        PyModule_AddObjectRef(created, "Shell", (PyObject *)&ShellType) < 0 ||
        PyModule_AddObjectRef(created, "HeaderParser", (PyObject *)&HeaderParserType) < 0 || add_guards(created) < 0 || add_stages(created) < 0) {
        Py_DECREF(created);
        return NULL;
    }
    return created;
}
