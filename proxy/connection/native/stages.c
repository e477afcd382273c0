/* FetchInputs and ProduceInputs: proxy.apis.reuse's fetch_inputs and produce_inputs (what a Fetch's and a Produce's
 * chains read, the key their plans are reused by) in C, called by the planner for every request without a frame;
 * and ProducerByteRate and ProducerIdStage, the two stages a reused Produce plan still asks (below).
 * Each reads what the pure function reads, in the same order (attributes at their slots' offsets: GETATTR), and
 * hands the cases it does not take (a Produce naming its topic by id) to the pure function it was made over, which
 * stays the reference (tests/proxy/apis/test_stages_native.py compares the two). */

#include "connection.h"

static PyObject *QuotasName, *FetchName, *ShadowName, *TopicsName, *FetchEnabledName, *ApiVersionName_,
    *ClientIdName, *ReplicaIdName, *UserName, *KeeperName, *VersionName, *VolumeName, *ProduceEnabledName,
    *PausedName, *ThrottlingName, *OnlyTopicName, *GuardName, *ProduceName, *EnabledName,
    *RecordAndDecideName, *EmptyText, *ProducerIdsName, *ClockName, *NowMsName, *ProducerIdName, *CheckedName,
    *RecheckName;

/* Each is a GuardObject (connection.h) of one field, the pure function it is the twin of (the asked stages: two). */

/* The truth of an attribute read: 1, 0, or -1 with an exception set. */
#define TRUTH(object, name)                                                                                        \
    __extension__({                                                                                                \
        PyObject *value_ = GETATTR(object, name);                                                                  \
        int truth_ = value_ == NULL ? -1 : PyObject_IsTrue(value_);                                                \
        Py_XDECREF(value_);                                                                                        \
        truth_;                                                                                                    \
    })

/* fetch_inputs(scope, session, header) */
static PyObject *fetch_inputs(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyObject *pure = ((GuardObject *)callable)->fields[0];
    if (PyVectorcall_NARGS(nargsf) != 3 || kwnames != NULL) return PyObject_Vectorcall(pure, args, nargsf, kwnames);
    PyObject *scope = args[0], *session = args[1], *header = args[2], *result = NULL;
    PyObject *quotas = GETATTR(scope, QuotasName), *fetch = NULL, *topics = NULL, *keeper = NULL;
    PyObject *items[5] = {NULL};
    if (quotas == NULL || (fetch = GETATTR(quotas, FetchName)) == NULL) goto out;
    int skip = TRUTH(fetch, ShadowName);
    if (skip == 0) {
        topics = GETATTR(quotas, TopicsName);
        skip = topics == NULL ? -1 : TRUTH(topics, FetchEnabledName);
    }
    if (skip != 0) {
        if (skip > 0) result = Py_NewRef(Py_None);
        goto out;
    }
    if ((items[0] = GETATTR(header, ApiVersionName_)) == NULL || (items[1] = GETATTR(header, ClientIdName)) == NULL ||
        (items[2] = GETATTR(header, ReplicaIdName)) == NULL || (items[3] = GETATTR(session, UserName)) == NULL ||
        (keeper = GETATTR(fetch, KeeperName)) == NULL || (items[4] = GETATTR(keeper, VersionName)) == NULL)
        goto out;
    result = PyTuple_Pack(5, items[0], items[1], items[2], items[3], items[4]);
out:
    for (int i = 0; i < 5; i++) Py_XDECREF(items[i]);
    Py_XDECREF(quotas);
    Py_XDECREF(fetch);
    Py_XDECREF(topics);
    Py_XDECREF(keeper);
    return result;
}

/* produce_inputs(scope, session, header): a topic named by id (v13+) goes to the pure function */
static PyObject *produce_inputs(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyObject *pure = ((GuardObject *)callable)->fields[0];
    if (PyVectorcall_NARGS(nargsf) != 3 || kwnames != NULL) return PyObject_Vectorcall(pure, args, nargsf, kwnames);
    PyObject *scope = args[0], *session = args[1], *header = args[2], *result = NULL;
    PyObject *quotas = GETATTR(scope, QuotasName), *volume = NULL, *topics = NULL, *topic = NULL, *guard = NULL;
    PyObject *guarded = NULL, *version = NULL, *user = NULL;
    if (quotas == NULL || (volume = GETATTR(quotas, VolumeName)) == NULL ||
        (topics = GETATTR(quotas, TopicsName)) == NULL)
        goto out;
    int skip = TRUTH(topics, ProduceEnabledName);
    if (skip == 0 && volume != Py_None) {
        skip = TRUTH(volume, PausedName);
        if (skip == 0) skip = TRUTH(volume, ThrottlingName);
    }
    if (skip != 0) {
        if (skip > 0) result = Py_NewRef(Py_None);
        goto out;
    }
    if ((topic = GETATTR(header, OnlyTopicName)) == NULL || (guard = GETATTR(scope, GuardName)) == NULL ||
        (guarded = GETATTR(guard, TopicsName)) == NULL)
        goto out;
    if (topic == Py_None) {
        int truth = PyObject_IsTrue(guarded);
        if (truth != 0) { /* several topics (or the prefix unread): the guard reads the body of a tenant's */
            if (truth > 0) result = Py_NewRef(Py_None);
            goto out;
        }
    } else if (Py_IS_TYPE(topic, &PyBytes_Type)) { /* named by id: the pure function's */
        result = PyObject_Vectorcall(pure, args, nargsf, NULL);
        goto out;
    }
    if ((version = GETATTR(header, ApiVersionName_)) != NULL && (user = GETATTR(session, UserName)) != NULL)
        result = PyTuple_Pack(3, version, topic, user);
out:
    Py_XDECREF(quotas);
    Py_XDECREF(volume);
    Py_XDECREF(topics);
    Py_XDECREF(topic);
    Py_XDECREF(guard);
    Py_XDECREF(guarded);
    Py_XDECREF(version);
    Py_XDECREF(user);
    return result;
}

/* ProducerByteRate(over_quota, pure): proxy.apis.byte_rate's plan_producer_byte_rate (``pure``) in C, a stage asked
 * for every Produce: the same reads in the same order, the manager's record_and_decide called as the pure one calls
 * it; within quota (FORWARD, the common case) None without a frame, and any other decision handed with the header to
 * ``over_quota(header, decision)``, the pure function's own rest (tests/proxy/apis/test_byte_rate_stage_native.py
 * compares the two). */
static PyObject *producer_byte_rate(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyObject *over_quota = ((GuardObject *)callable)->fields[0], *pure = ((GuardObject *)callable)->fields[1];
    if (PyVectorcall_NARGS(nargsf) != 3 || kwnames != NULL || ForwardDecision == NULL)
        return PyObject_Vectorcall(pure, args, nargsf, kwnames);
    PyObject *scope = args[0], *session = args[1], *header = args[2], *result = NULL;
    PyObject *quotas = GETATTR(scope, QuotasName), *produce = NULL, *user = NULL, *client_id = NULL, *size = NULL;
    if (quotas == NULL || (produce = GETATTR(quotas, ProduceName)) == NULL) goto out;
    int enabled = TRUTH(produce, EnabledName);
    if (enabled <= 0) {
        if (enabled == 0) result = Py_NewRef(Py_None); /* no producer_byte_rate anywhere: nothing recorded */
        goto out;
    }
    if ((user = GETATTR(session, UserName)) == NULL || (client_id = GETATTR(header, ClientIdName)) == NULL) goto out;
    int named = PyObject_IsTrue(client_id); /* header.client_id or "" */
    if (named < 0) goto out;
    if (!named) Py_SETREF(client_id, Py_NewRef(EmptyText));
    if ((size = GETATTR(header, SizeName)) == NULL) goto out;
    PyObject *decision = call_method(RecordAndDecideName, produce, user, client_id, size, 4);
    if (decision == NULL) goto out;
    if (decision == ForwardDecision) {
        result = Py_NewRef(Py_None); /* within quota: nothing to add, nothing made */
    } else {
        PyObject *rest[] = {header, decision};
        result = PyObject_Vectorcall(over_quota, rest, 2, NULL);
    }
    Py_DECREF(decision);
out:
    Py_XDECREF(quotas);
    Py_XDECREF(produce);
    Py_XDECREF(user);
    Py_XDECREF(client_id);
    Py_XDECREF(size);
    return result;
}

/* The int a - b < c for three ints, without allocating where they fit in 64 bits: 1, 0, or -1 with an error. */
static int less_after(PyObject *a, PyObject *b, PyObject *c) {
    if (PyLong_CheckExact(a) && PyLong_CheckExact(b) && PyLong_CheckExact(c)) {
        int oa, ob, oc;
        long long x = PyLong_AsLongLongAndOverflow(a, &oa), y = PyLong_AsLongLongAndOverflow(b, &ob),
                  z = PyLong_AsLongLongAndOverflow(c, &oc), diff;
        if (!oa && !ob && !oc && !__builtin_sub_overflow(x, y, &diff)) return diff < z;
    }
    PyObject *difference = PyNumber_Subtract(a, b);
    if (difference == NULL) return -1;
    PyObject *less = PyObject_RichCompare(difference, c, Py_LT);
    Py_DECREF(difference);
    if (less == NULL) return -1;
    int truth = PyObject_IsTrue(less);
    Py_DECREF(less);
    return truth;
}

/* The truth of a == b (Python's ==, then the truth of what it gives): 1, 0, or -1 with an error. */
static int equal(PyObject *a, PyObject *b) {
    if (PyLong_CheckExact(a) && PyLong_CheckExact(b)) return PyObject_RichCompareBool(a, b, Py_EQ);
    PyObject *same = PyObject_RichCompare(a, b, Py_EQ);
    if (same == NULL) return -1;
    int truth = PyObject_IsTrue(same);
    Py_DECREF(same);
    return truth;
}

/* ProducerIdStage(count, pure): proxy.apis.producer_ids' pure_plan_produce (``pure``) in C, the other stage asked for
 * every Produce: the same reads in the same order; a Produce without producer ids, the quota off, or the connection's
 * one producer id checked within the recheck interval: None without a frame; any other goes with the time read to
 * ``count(scope, session, header, now)``, the pure function's own rest. Producer ids that are not a tuple go to the
 * pure function before anything is read (tests/proxy/apis/test_producer_id_stage_native.py compares the two). */
static PyObject *producer_id_stage(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyObject *count = ((GuardObject *)callable)->fields[0], *pure = ((GuardObject *)callable)->fields[1];
    if (PyVectorcall_NARGS(nargsf) != 3 || kwnames != NULL) return PyObject_Vectorcall(pure, args, nargsf, kwnames);
    PyObject *scope = args[0], *session = args[1], *header = args[2], *result = NULL;
    PyObject *quotas = GETATTR(scope, QuotasName), *quota = NULL, *pids = NULL, *clock = NULL, *now = NULL;
    PyObject *last = NULL, *checked = NULL, *recheck = NULL;
    if (quotas == NULL || (quota = GETATTR(quotas, ProducerIdsName)) == NULL ||
        (pids = GETATTR(header, ProducerIdsName)) == NULL)
        goto out;
    if (!PyTuple_CheckExact(pids)) { /* the pure function's, from the start: nothing is read twice that counts */
        result = PyObject_Vectorcall(pure, args, nargsf, NULL);
        goto out;
    }
    int skip = PyTuple_GET_SIZE(pids) == 0;
    if (!skip) {
        int enabled = TRUTH(quota, EnabledName);
        if (enabled < 0) goto out;
        skip = !enabled;
    }
    if (skip) { /* no producer ids, or no producer_ids_rate anywhere */
        result = Py_NewRef(Py_None);
        goto out;
    }
    if ((clock = GETATTR(quotas, ClockName)) == NULL ||
        (now = call_method(NowMsName, clock, NULL, NULL, NULL, 1)) == NULL)
        goto out;
    int known = 0;
    if (PyTuple_GET_SIZE(pids) == 1) {
        if ((last = GETATTR(session, ProducerIdName)) == NULL) goto out;
        known = equal(PyTuple_GET_ITEM(pids, 0), last);
        if (known > 0) {
            if ((checked = GETATTR(session, CheckedName)) == NULL || (recheck = GETATTR(quota, RecheckName)) == NULL)
                goto out;
            known = less_after(now, checked, recheck);
        }
        if (known < 0) goto out;
    }
    if (known) {
        result = Py_NewRef(Py_None); /* checked recently: known, nothing to count */
    } else {
        PyObject *rest[] = {scope, session, header, now};
        result = PyObject_Vectorcall(count, rest, 4, NULL);
    }
out:
    Py_XDECREF(quotas);
    Py_XDECREF(quota);
    Py_XDECREF(pids);
    Py_XDECREF(clock);
    Py_XDECREF(now);
    Py_XDECREF(last);
    Py_XDECREF(checked);
    Py_XDECREF(recheck);
    return result;
}

static PyObject *producer_id_stage_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    return guard_new(type, args, kwds, 2, producer_id_stage, "");
}

static PyObject *producer_byte_rate_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    return guard_new(type, args, kwds, 2, producer_byte_rate, "");
}

static PyObject *fetch_inputs_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    return guard_new(type, args, kwds, 1, fetch_inputs, "");
}

static PyObject *produce_inputs_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    return guard_new(type, args, kwds, 1, produce_inputs, "");
}

GUARD_TYPE(FetchInputs, "proxy.apis.reuse.fetch_inputs in C", fetch_inputs_new);
GUARD_TYPE(ProduceInputs, "proxy.apis.reuse.produce_inputs in C", produce_inputs_new);
/* A stage is named by its function's names (proxy.apis.reuse's errors list them): the pure one's. */
static PyObject *pure_name(GuardObject *self, void *which) {
    return PyObject_GetAttrString(self->fields[1], (const char *)which);
}

static PyGetSetDef pure_names[] = {
    {"__name__", (getter)pure_name, NULL, "the pure function's", "__name__"},
    {"__qualname__", (getter)pure_name, NULL, "the pure function's", "__qualname__"},
    {NULL},
};

/* An asked stage's type: a guard named by the pure function it is made over. */
static GUARD_TYPE(ProducerByteRate, "proxy.apis.byte_rate.plan_producer_byte_rate in C", producer_byte_rate_new,
                  .tp_getset = pure_names);
static GUARD_TYPE(ProducerIdStage, "proxy.apis.producer_ids.pure_plan_produce in C", producer_id_stage_new,
                  .tp_getset = pure_names);

int add_stages(PyObject *module) {
    struct {
        PyObject **slot;
        const char *name;
    } names[] = {
        {&QuotasName, "quotas"},           {&FetchName, "fetch"},         {&ShadowName, "shadow"},
        {&TopicsName, "topics"},           {&FetchEnabledName, "fetch_enabled"},
        {&ApiVersionName_, "api_version"}, {&ClientIdName, "client_id"},  {&ReplicaIdName, "replica_id"},
        {&UserName, "user"},               {&KeeperName, "keeper"},       {&VersionName, "version"},
        {&VolumeName, "volume"},           {&ProduceEnabledName, "produce_enabled"},
        {&PausedName, "paused"},           {&ThrottlingName, "throttling"}, {&OnlyTopicName, "only_topic"},
        {&GuardName, "guard"},             {&ProduceName, "produce"},     {&EnabledName, "enabled"},
        {&RecordAndDecideName, "record_and_decide"}, {&EmptyText, ""},
        {&ProducerIdsName, "producer_ids"}, {&ClockName, "clock"}, {&NowMsName, "now_ms"},
        {&ProducerIdName, "producer_id"},   {&CheckedName, "producer_id_checked_ms"}, {&RecheckName, "recheck_ms"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if ((*names[i].slot = PyUnicode_InternFromString(names[i].name)) == NULL) return -1;
    PyTypeObject *types[] = {&FetchInputs, &ProduceInputs, &ProducerByteRate, &ProducerIdStage};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (PyType_Ready(types[i]) < 0 || PyModule_AddObjectRef(module, types[i]->tp_name + 25, (PyObject *)types[i]) < 0)
            return -1;
    return 0;
}
