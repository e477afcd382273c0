/* proxy.apis.plan_request's common path in C: a request of an API whose plan is reused on the connection
 * (proxy.apis.reuse), and one of an API with no chain, planned without a Python frame of plan_request's; every other
 * case is handed to plan_request itself (it raises or plans as it always does). What is done here is plan_request's
 * own steps, in its order: the session not awaiting an authentication, the API not counted by a request_rate, its
 * uncounted planning (chain, lowest and highest version, inputs, asked stages), the version within them, the chain's
 * inputs read, and then proxy.apis.reuse's hits: reused's (the connection's last plan of the API, of the same inputs
 * and scope, made twice the same) returned; reused_asking's (its reused plans followed by asked stages alone) with the
 * asked stages called in turn, reuse.asked_from taking over once one makes a plan; otherwise reused, reused_asking or
 * fold called as plan_request calls them.
 * tests/proxy/apis/test_plan_reuse.py and test_produce_plan_reuse.py run it beside plan_request on the same
 * requests. */

#include "connection.h"

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *plan_request; /* proxy.apis.plan_request: every case but the common ones */
    PyObject *planning;     /* proxy.apis.UNCOUNTED_PLANNING: api key -> (chain, low, high, inputs, asks) */
    PyObject *fold, *reused, *reused_asking, *asked_from; /* proxy.apis.stages.fold, proxy.apis.reuse's three */
} Planner;

static PyObject *AwaitingName, *QuotasName, *RequestsName_, *CountedName, *ReusedName;

static PyObject *hand_over(Planner *self, PyObject *const *args) {
    return PyObject_Vectorcall(self->plan_request, args, 3, NULL);
}

/* the version within [low, high]: 1, 0, or -1 with an error (three ints of one machine word compared as such) */
static int within(PyObject *version, PyObject *low, PyObject *high) {
    if (PyLong_CheckExact(version) && PyLong_CheckExact(low) && PyLong_CheckExact(high)) {
        int ov, ol, oh;
        long v = PyLong_AsLongAndOverflow(version, &ov), l = PyLong_AsLongAndOverflow(low, &ol),
             h = PyLong_AsLongAndOverflow(high, &oh);
        if (!ov && !ol && !oh) return l <= v && v <= h;
    }
    int above = PyObject_RichCompareBool(low, version, Py_LE);
    if (above <= 0) return above;
    return PyObject_RichCompareBool(version, high, Py_LE);
}

/* The connection's last entry of the API in session.reused (proxy.apis.reuse) when it is of these inputs and scope,
 * its plans made twice the same (a new reference); NULL with no error when there is none, NULL with an error set.
 * reused's entries are (scope, inputs, plan, twice), reused_asking's (scope, inputs, turns, same, plans). */
static PyObject *reused_entry(PyObject *session, PyObject *api_key, PyObject *scope, PyObject *read, Py_ssize_t size) {
    PyObject *reused = GETATTR(session, ReusedName);
    if (reused == NULL) return NULL;
    if (!PyDict_CheckExact(reused)) {
        Py_DECREF(reused);
        return NULL; /* not the session's plain dict: the Python looks */
    }
    PyObject *last = PyDict_GetItemWithError(reused, api_key); /* borrowed */
    PyObject *found = NULL;
    if (last != NULL && PyTuple_CheckExact(last) && PyTuple_GET_SIZE(last) == size) {
        Py_INCREF(last);
        int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(last, 1), read, Py_EQ);
        if (same > 0 && PyTuple_GET_ITEM(last, 0) == scope) {
            int twice = PyObject_IsTrue(PyTuple_GET_ITEM(last, 3));
            if (twice > 0) found = Py_NewRef(last);
        }
        Py_DECREF(last);
    }
    Py_DECREF(reused);
    return found;
}

/* reuse.reused_asking's common turns: its stages' plans reused, only asked stages after them (a Produce's producer
 * ids and bytes): each asked in turn; the plan when none makes one, else reuse.asked_from goes on from there. NULL
 * with no error when the turns are not of that kind (reused_asking looks), NULL with an error set. */
static PyObject *asked_turns(Planner *self, PyObject *turns, PyObject *const *args) {
    if (!PyTuple_CheckExact(turns) || PyTuple_GET_SIZE(turns) != 4) return NULL;
    PyObject *rest = PyTuple_GET_ITEM(turns, 2);
    int asked_only = PyObject_IsTrue(PyTuple_GET_ITEM(turns, 3));
    if (asked_only <= 0 || !PyTuple_CheckExact(rest)) return NULL;
    Py_INCREF(turns); /* held: an asked stage may change the session's entries */
    PyObject *result = NULL;
    for (Py_ssize_t at = 0; at < PyTuple_GET_SIZE(rest); at++) {
        PyObject *more = PyObject_Vectorcall(PyTuple_GET_ITEM(rest, at), args, 3, NULL);
        if (more == NULL) goto out;
        if (more != Py_None) {
            PyObject *index = PyLong_FromSsize_t(at);
            if (index != NULL) {
                PyObject *from[] = {PyTuple_GET_ITEM(turns, 1), rest, index, more, args[0], args[1], args[2]};
                result = PyObject_Vectorcall(self->asked_from, from, 7, NULL);
                Py_DECREF(index);
            }
            Py_DECREF(more);
            goto out;
        }
        Py_DECREF(more);
    }
    result = Py_NewRef(PyTuple_GET_ITEM(turns, 0));
out:
    Py_DECREF(turns);
    if (result == NULL && !PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "an asked stage failed silently");
    return result;
}

static PyObject *planner_call(Planner *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (PyVectorcall_NARGS(nargsf) != 3 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "a planner takes (scope, session, header)");
        return NULL;
    }
    PyObject *scope = args[0], *session = args[1], *header = args[2];
    PyObject *value = GETATTR(session, AwaitingName);
    if (value == NULL) return NULL;
    int awaiting = PyObject_IsTrue(value);
    Py_DECREF(value);
    if (awaiting < 0) return NULL;
    if (awaiting) return hand_over(self, args); /* before SASL authentication: plan_request checks the API */
    PyObject *api_key = GETATTR(header, ApiKeyName);
    if (api_key == NULL) return NULL;
    PyObject *result = NULL, *counted = NULL, *version = NULL, *read = NULL, *held = NULL;
    if ((value = GETATTR(scope, QuotasName)) == NULL) goto out;
    PyObject *requests = GETATTR(value, RequestsName_);
    Py_DECREF(value);
    if (requests == NULL) goto out;
    counted = GETATTR(requests, CountedName);
    Py_DECREF(requests);
    if (counted == NULL) goto out;
    int is_counted = PySequence_Contains(counted, api_key);
    if (is_counted < 0) goto out;
    if (is_counted) { /* a request_rate counts it: its plan is made for each request */
        result = hand_over(self, args);
        goto out;
    }
    PyObject *planning = PyDict_GetItemWithError(self->planning, api_key); /* borrowed */
    if (planning == NULL) {
        if (!PyErr_Occurred()) result = Py_NewRef(Pass); /* no chain: nothing to plan */
        goto out;
    }
    held = Py_NewRef(planning); /* its items are used across calls into Python, which may replace the table's entry */
    if (!PyTuple_CheckExact(planning) || PyTuple_GET_SIZE(planning) != 5) {
        PyErr_SetString(PyExc_TypeError, "an API's planning is (chain, low, high, inputs, asks)");
        goto out;
    }
    PyObject *chain = PyTuple_GET_ITEM(planning, 0), *inputs = PyTuple_GET_ITEM(planning, 3);
    PyObject *asks = PyTuple_GET_ITEM(planning, 4);
    if ((version = GETATTR(header, ApiVersionName)) == NULL) goto out;
    int ok = within(version, PyTuple_GET_ITEM(planning, 1), PyTuple_GET_ITEM(planning, 2));
    if (ok < 0) goto out;
    if (!ok) { /* no broker speaks it: plan_request says so */
        result = hand_over(self, args);
        goto out;
    }
    PyObject *fold_args[] = {chain, scope, session, header, NULL};
    if (inputs == Py_None) {
        result = PyObject_Vectorcall(self->fold, fold_args, 4, NULL);
        goto out;
    }
    if ((read = PyObject_Vectorcall(inputs, args, 3, NULL)) == NULL) goto out;
    if (read == Py_None) { /* planned for this request alone */
        result = PyObject_Vectorcall(self->fold, fold_args, 4, NULL);
        goto out;
    }
    PyObject *last = reused_entry(session, api_key, scope, read, asks == Py_None ? 4 : 5);
    if (last == NULL && PyErr_Occurred()) goto out;
    if (asks == Py_None) {
        if (last != NULL) { /* reused's hit: the last plan */
            result = Py_NewRef(PyTuple_GET_ITEM(last, 2));
            Py_DECREF(last);
            goto out;
        }
        PyObject *reused_args[] = {chain, scope, session, header, read};
        result = PyObject_Vectorcall(self->reused, reused_args, 5, NULL);
        goto out;
    }
    if (last != NULL) {
        result = asked_turns(self, PyTuple_GET_ITEM(last, 2), args);
        Py_DECREF(last);
        if (result != NULL || PyErr_Occurred()) goto out;
    }
    PyObject *asking_args[] = {chain, asks, scope, session, header, read};
    result = PyObject_Vectorcall(self->reused_asking, asking_args, 6, NULL);
out:
    Py_DECREF(api_key);
    Py_XDECREF(counted);
    Py_XDECREF(version);
    Py_XDECREF(read);
    Py_XDECREF(held);
    return result;
}

static PyObject *planner_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"plan_request", "planning", "fold", "reused", "reused_asking", "asked_from", NULL};
    PyObject *plan_request, *planning, *fold, *reused, *reused_asking, *asked_from;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!OOOO", names, &plan_request, &PyDict_Type, &planning, &fold,
                                     &reused, &reused_asking, &asked_from))
        return NULL;
    if (AwaitingName == NULL &&
        ((AwaitingName = PyUnicode_InternFromString("awaiting_authentication")) == NULL ||
         (QuotasName = PyUnicode_InternFromString("quotas")) == NULL ||
         (RequestsName_ = PyUnicode_InternFromString("requests")) == NULL ||
         (CountedName = PyUnicode_InternFromString("counted")) == NULL ||
         (ReusedName = PyUnicode_InternFromString("reused")) == NULL))
        return NULL;
    Planner *self = (Planner *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = (vectorcallfunc)planner_call;
    self->plan_request = Py_NewRef(plan_request);
    self->planning = Py_NewRef(planning);
    self->fold = Py_NewRef(fold);
    self->reused = Py_NewRef(reused);
    self->reused_asking = Py_NewRef(reused_asking);
    self->asked_from = Py_NewRef(asked_from);
    return (PyObject *)self;
}

static int planner_traverse(Planner *self, visitproc visit, void *arg) {
    Py_VISIT(self->plan_request);
    Py_VISIT(self->planning);
    Py_VISIT(self->fold);
    Py_VISIT(self->reused);
    Py_VISIT(self->reused_asking);
    Py_VISIT(self->asked_from);
    return 0;
}

static int planner_clear(Planner *self) {
    Py_CLEAR(self->plan_request);
    Py_CLEAR(self->planning);
    Py_CLEAR(self->fold);
    Py_CLEAR(self->reused);
    Py_CLEAR(self->reused_asking);
    Py_CLEAR(self->asked_from);
    return 0;
}

static void planner_dealloc(Planner *self) {
    PyObject_GC_UnTrack(self);
    planner_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyTypeObject PlannerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "proxy.connection._native.Planner",
    .tp_basicsize = sizeof(Planner),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "proxy.apis.plan_request, its common path in C (a reused plan, an API with no chain)",
    .tp_new = planner_new,
    .tp_dealloc = (destructor)planner_dealloc,
    .tp_traverse = (traverseproc)planner_traverse,
    .tp_clear = (inquiry)planner_clear,
    .tp_vectorcall_offset = offsetof(Planner, vectorcall),
    .tp_call = PyVectorcall_Call,
};
