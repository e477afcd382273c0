/* proxy.connection._native: the connection's per-request hot path in C, each part the twin of a pure class kept as
 * its reference. inflight.c: the queue of requests in flight (proxy.connection.inflight.PureInFlightQueue);
 * responses.c: the response path's per-response methods and the broker side's event loop
 * (proxy.connection.response_frames.PureResponses); requests.c: the request path's per-request methods and the client
 * side's event loop (proxy.connection.request_frames.PureRequests); writes.c: the writes queued while a read is split
 * (proxy.connection.write_batch.PureWriteBatch); planner.c: proxy.apis.plan_request's common path; shell.c: what the
 * event loop calls at every read (proxy.connection.shell.PureShell); parsers.c: the core's header parsers' common
 * case; counts.c: the per-API counts; module.c: the
 * module, configured once by proxy.connection.compiled with the Python objects the parts compare with and raise. */

#ifndef CONNECTION_NATIVE_H
#define CONNECTION_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* handed over by configure() (module.c), once, at import of proxy.connection.compiled */
extern PyObject *NoLeg;           /* proxy.apis.response_leg.NO_LEG */
extern PyObject *ProtocolError;   /* proxy.codec.errors.ProtocolError */
extern PyObject *NoUsageRecorder; /* proxy.ops.usage_table.NO_USAGE_RECORDER */
extern PyObject *Pass;            /* proxy.apis.PASS: the plan of a request that needs nothing */
extern PyObject *NoUsage;         /* proxy.apis.usage.NO_USAGE */
extern PyObject *Four;            /* 4: a frame's size prefix */
extern PyObject *ResponseHeaderLength, *TaggedFields; /* proxy.codec.header's and proxy.codec.skim's */
extern PyObject *ResponseText;                        /* "response" */
extern PyObject *EvHeader, *EvFrame, *EvNeedData, *EvLastSegment, *EvSegment, *EvBoundary; /* the splitter's events */
extern PyObject *ActStream, *ActBuffer, *ActDrop;                             /* and actions */
extern PyObject *ForwardRequestClass; /* proxy.apis.ForwardRequest */
extern PyObject *ForwardDecision;     /* quota.primitives.decision.FORWARD */
/* interned attribute and method names */
extern PyObject *AcksName, *CorrelationIdName, *RawName, *SizeName, *ApiKeyName, *LookupName, *ResponseName,
    *AnsweredName, *SendReadyLocalName, *FrameName, *NextEventName, *ActName, *HeaderName, *ValueName,
    *StreamingName, *InflightName, *RequestName, *UsageName, *ActionName, *LocalResponseName, *ExpectsResponseName,
    *LegName, *AbandonName, *ThrottleName, *ThrottleMethodName, *FrameEndedName, *ProbeName, *UnheardName,
    *MaxInflightName, *StartFrameName, *TakeRestName, *RewriteAloneName, *UnlessTaggedName, *ApiVersionName,
    *DecideName, *HeaderLengthName, *ThenName, *UndecidableName, *BodyName, *ActMethodName, *ObserveName,
    *SettleName, *AccountedName, *RecordResponseName, *RewriteName, *ChargedName, *MidFrameName, *HeldName;

/* PyLong_AsLongLong without its detour: CPython 3.11 converts an int of more than one 30-bit digit (a clock's
 * nanoseconds, 64-bit ids) through a byte array (about 165 instructions, three times a request); the conversion
 * that reports overflow reads the digits directly. The same value and the same errors (OverflowError past 64 bits,
 * TypeError for what is not an int): -1 with an error set, as PyLong_AsLongLong. */
static inline long long as_long_long(PyObject *value) {
    int overflow;
    long long result = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow) PyErr_SetString(PyExc_OverflowError, "int too big to convert");
    return result;
}

#define NOT_CONFIGURED_TEXT "proxy.connection._native is used through proxy.connection.compiled"
#define CONFIGURED                                                                                                 \
    if (NoLeg == NULL) {                                                                                           \
        PyErr_SetString(PyExc_RuntimeError, NOT_CONFIGURED_TEXT);                                                  \
        return NULL;                                                                                               \
    }

/* an entry of the queue: proxy.connection.inflight.PureInFlight's twin */
typedef struct {
    PyObject_HEAD
    PyObject *header;
    PyObject *leg;
    PyObject *local_response; /* None unless the proxy answers the request itself */
    PyObject *throttle;       /* None unless a quota throttle goes with the response */
    long long received_ns;
    long long correlation_id; /* the header's, read once */
    char expects_response, throttled, probe;
} Entry;

/* the queue: proxy.connection.inflight.PureInFlightQueue's twin (its hot methods) */
typedef struct {
    PyObject_HEAD
    Entry **ring; /* capacity slots, a power of two; count of them from head on are the entries, in order */
    Py_ssize_t head, count, capacity;
    Py_ssize_t local_answers; /* entries answered by the proxy, not yet handed out */
    int answers_acks0;        /* -1 not known yet, 0 the broker stays silent for acks=0, 1 it answers them */
    char probe_sent, probe_wanted;
} Queue;

extern PyTypeObject EntryType, QueueType, ResponsesType, RequestsType, WriteBatchType, DirectWriteType, PlannerType,
    ShellType, HeaderParserType;

/* shell.c: the two sizes it compares with (configure_shell()'s, module.c); 0, or -1 with an error set */
int shell_configure(PyObject *throttled_read_bytes, PyObject *splice_min_bytes, PyObject *bound_changed);
PyObject *counted_bound_changed(PyObject *counted, PyObject *now);

/* Queue.match: the entry a response of this correlation id answers (a new reference), None (a new reference: the
 * response is dropped), or NULL with ProtocolError set. */
PyObject *queue_match(Queue *self, long long correlation_id);
/* Queue.add: the entry queued (a new reference), None (acks=0 to a broker known not to answer it), or NULL. */
PyObject *queue_add(Queue *self, PyObject *header, long long received_ns, PyObject *leg);
/* Queue.add_local: 0, or -1 with an error set. */
int queue_add_local(Queue *self, PyObject *header, long long received_ns, PyObject *response);

/* The small calls every part makes into Python, one definition each: the clock's ns, an int attribute (0, or -1
 * with an error set); a method by name with nargs of self, a, b, c (a new reference or NULL); a call made for its
 * effect (its result released: 0, or -1); the splitter's value handed to write (0 or -1); value is an InFlight entry
 * (0, or -1 with TypeError set). Inline: they sit on every frame's path. */

static inline int clock_ns(PyObject *clock, long long *now) {
    PyObject *value = PyObject_CallNoArgs(clock);
    if (value == NULL) return -1;
    *now = as_long_long(value);
    Py_DECREF(value);
    return *now == -1 && PyErr_Occurred() ? -1 : 0;
}

/* memoryview(frame)[start:] as one view, not a view and its slice (about 500 instructions less): a view just made,
 * held by nothing else, of one dimension of bytes, is narrowed in place as the slice would be made (its buffer,
 * length and shape moved on by the start, clamped as a slice clamps it); any other goes through the slice. A new
 * reference, or NULL with an error set. */
static inline PyObject *view_from(PyObject *frame, Py_ssize_t start) {
    PyObject *view = PyMemoryView_FromObject(frame);
    if (view == NULL) return NULL;
    Py_buffer *b = PyMemoryView_GET_BUFFER(view);
    if (Py_REFCNT(view) == 1 && b->ndim == 1 && b->itemsize == 1 && b->shape != NULL && b->suboffsets == NULL &&
        (b->strides == NULL || b->strides[0] == 1)) {
        Py_ssize_t len = b->len;
        start = start < 0 ? (start + len < 0 ? 0 : start + len) : start > len ? len : start;
        b->buf = (char *)b->buf + start;
        b->len = b->shape[0] = len - start;
        return view;
    }
    PyObject *body = PySequence_GetSlice(view, start, PY_SSIZE_T_MAX);
    Py_DECREF(view);
    return body;
}

/* Attributes read and set without a lookup by name, as CPython's own specialised bytecode does (LOAD_ATTR_SLOT,
 * STORE_ATTR_SLOT, and a C type's getset and member descriptors called directly): a lookup by name costs 80-100
 * instructions, and the paths make thirty of them per request and response. Each call site of GETATTR or SETATTR
 * keeps the type it last saw, that type's version tag (which CPython changes whenever the type or a base is modified)
 * and what the type's descriptor for the name does: the offset of a plain object slot (a __slots__ member, or a C
 * type's object member), or a C type's getter (setter) and its closure, or a C type's member of another kind. These
 * are data descriptors, which the generic attribute access takes before any instance __dict__; they are used only
 * where the type's attribute access is the generic one (no __getattribute__ or __setattr__ of its own, so not a frozen
 * dataclass's set). An unset slot, and every other case, goes through PyObject_GetAttr/SetAttr as before, with the
 * same answer and error. One cache per call site: a helper taking the name as an argument would share one between
 * all of its callers' names (each call a miss), so the helpers that read by name are macros over GETATTR. */
typedef struct {
    PyTypeObject *type; /* borrowed: compared, never dereferenced unless its version matches */
    unsigned int version;
    PyObject *name;
    Py_ssize_t offset;     /* an object slot's offset; 0: none */
    getter get;            /* reading: a getset descriptor's getter (setter, writing); NULL: none */
    setter set;
    void *closure;         /* the getset's closure */
    PyMemberDef *member;   /* reading: a member of another kind, read as its descriptor reads it; NULL: none */
} AttrCache;

PyObject *attr_fill(PyObject *object, PyObject *name, AttrCache *cache);              /* module.c */
int setattr_fill(PyObject *object, PyObject *name, PyObject *value, AttrCache *cache); /* module.c */

static inline PyObject *attr_cached(PyObject *object, PyObject *name, AttrCache *cache) {
    PyTypeObject *type = Py_TYPE(object);
    if (type == cache->type && name == cache->name && type->tp_version_tag == cache->version) {
        if (cache->offset) {
            PyObject *value = *(PyObject **)((char *)object + cache->offset);
            if (value != NULL) return Py_NewRef(value);
        } else if (cache->get != NULL) {
            return cache->get(object, cache->closure);
        } else if (cache->member != NULL) {
            return PyMember_GetOne((const char *)object, cache->member);
        }
        return PyObject_GetAttr(object, name);
    }
    return attr_fill(object, name, cache);
}

static inline int setattr_cached(PyObject *object, PyObject *name, PyObject *value, AttrCache *cache) {
    PyTypeObject *type = Py_TYPE(object);
    if (value != NULL && type == cache->type && name == cache->name && type->tp_version_tag == cache->version) {
        if (cache->offset) {
            Py_XSETREF(*(PyObject **)((char *)object + cache->offset), Py_NewRef(value));
            return 0;
        }
        if (cache->set != NULL) return cache->set(object, value, cache->closure);
    }
    return setattr_fill(object, name, value, cache);
}

#define GETATTR(object, name)                                                                                      \
    __extension__({                                                                                                \
        static AttrCache attr_cache_;                                                                              \
        attr_cached((object), (name), &attr_cache_);                                                               \
    })
#define SETATTR(object, name, value)                                                                               \
    __extension__({                                                                                                \
        static AttrCache attr_cache_;                                                                              \
        setattr_cached((object), (name), (value), &attr_cache_);                                                   \
    })

static inline int long_of(PyObject *found, long long *value) {
    if (found == NULL) return -1;
    *value = as_long_long(found);
    Py_DECREF(found);
    return *value == -1 && PyErr_Occurred() ? -1 : 0;
}
#define long_attr(object, name, value) long_of(GETATTR(object, name), value)

/* self.name(a, b, c) (the first nargs - 1 of them). Each call site caches, as GETATTR does, the type it last saw,
 * its version tag and the method its class defines under that name, when finding it is what a method call does
 * without the instance: a function or a method descriptor (CPython's own unbound-method call) of a type whose
 * instances have no __dict__ of their own that could hold the name, and with generic attribute access. It then calls
 * the method with self first, as PyObject_VectorcallMethod does after its lookup; every other case goes by name. */
typedef struct {
    PyTypeObject *type; /* borrowed: compared, never dereferenced unless its version matches */
    unsigned int version;
    PyObject *name;
    PyObject *method; /* borrowed from the type's dict while the version holds; NULL: call by name */
} MethodCache;

void method_fill(PyObject *self, PyObject *name, MethodCache *cache); /* module.c */

static inline PyObject *call_cached(PyObject *name, PyObject *self, PyObject *a, PyObject *b, PyObject *c,
                                   Py_ssize_t nargs, MethodCache *cache) {
    PyTypeObject *type = Py_TYPE(self);
    if (type != cache->type || name != cache->name || type->tp_version_tag != cache->version)
        method_fill(self, name, cache);
    PyObject *args[] = {self, a, b, c};
    if (cache->method != NULL && type == cache->type) { /* held for the call, as a bound method would hold it */
        PyObject *method = Py_NewRef(cache->method);
        PyObject *result = PyObject_Vectorcall(method, args, nargs, NULL);
        Py_DECREF(method);
        return result;
    }
    return PyObject_VectorcallMethod(name, args, (size_t)nargs | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

#define call_method(name, self, a, b, c, nargs)                                                                     \
    __extension__({                                                                                                \
        static MethodCache method_cache_;                                                                          \
        call_cached((name), (self), (a), (b), (c), (nargs), &method_cache_);                                       \
    })

static inline int done(PyObject *result) {
    if (result == NULL) return -1;
    Py_DECREF(result);
    return 0;
}

/* write(splitter.value): a macro, so that each call site has its own GETATTR cache */
#define pass_value(write, splitter) pass_on((write), GETATTR((splitter), ValueName))
static inline int pass_on(PyObject *write, PyObject *value) {
    if (value == NULL) return -1;
    PyObject *written = PyObject_CallOneArg(write, value);
    Py_DECREF(value);
    return done(written);
}

/* The flow's in-flight queue (a new reference), or NULL with an error set: the paths' twins keep it, and it must be
 * the queue's twin too. */
static inline Queue *flow_queue(PyObject *flow) {
    PyObject *queue = PyObject_GetAttr(flow, InflightName);
    if (queue == NULL) return NULL;
    if (!PyObject_TypeCheck(queue, &QueueType)) {
        PyErr_Format(PyExc_TypeError, "the flow's in-flight queue is a %.100s, not the twin's", Py_TYPE(queue)->tp_name);
        Py_DECREF(queue);
        return NULL;
    }
    return (Queue *)queue;
}

static inline int as_entry(PyObject *value) {
    if (Py_TYPE(value) != &EntryType) {
        PyErr_Format(PyExc_TypeError, "expected an InFlight entry, got %.100s", Py_TYPE(value)->tp_name);
        return -1;
    }
    return 0;
}

/* counts.c: proxy.ops.metrics.ApiMetrics' request(nbytes) and answered(nbytes, seconds); 0, or -1 with an error */
int counts_configure(PyObject *api_metrics_class, PyObject *buckets);
int count_request(PyObject *metrics, PyObject *nbytes);
int count_answered(PyObject *metrics, PyObject *nbytes, PyObject *seconds);

/* guards.c: FetchCap, BudgetTrim, TagRewrite and Chained (proxy.apis.guards' twins) added to the module; and what
 * they share with stages.c's twins: a callable object whose fields are object pointers after its vectorcall */
int add_guards(PyObject *module);
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Py_ssize_t count; /* object fields that follow */
    PyObject *fields[10];
} GuardObject;
int guard_traverse(GuardObject *self, visitproc visit, void *arg);
int guard_clear(GuardObject *self);
void guard_dealloc(GuardObject *self);
/* an object of ``type`` over ``count`` positional arguments, each kept as a field; ``ints`` marks with 'i' those that
 * must be ints */
PyObject *guard_new(PyTypeObject *type, PyObject *args, PyObject *kwds, Py_ssize_t count, vectorcallfunc call,
                    const char *ints);
/* ... and more designated initializers after NEW, if any (an asked stage's getsets) */
#define GUARD_TYPE(NAME, DOC, NEW, ...)                                                                            \
    PyTypeObject NAME = {                                                                                          \
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = "proxy.connection._native." #NAME,                               \
        .tp_basicsize = sizeof(GuardObject),                                                                       \
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,                          \
        .tp_doc = DOC,                                                                                             \
        .tp_new = NEW,                                                                                             \
        .tp_call = PyVectorcall_Call,                                                                              \
        .tp_vectorcall_offset = offsetof(GuardObject, vectorcall),                                                 \
        .tp_traverse = (traverseproc)guard_traverse,                                                               \
        .tp_clear = (inquiry)guard_clear,                                                                          \
        .tp_dealloc = (destructor)guard_dealloc,                                                                   \
        __VA_ARGS__                                                                                                \
    }
/* stages.c: FetchInputs and ProduceInputs (proxy.apis.reuse's fetch_inputs and produce_inputs' twins) added */
int add_stages(PyObject *module);

#endif
