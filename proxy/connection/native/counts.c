/* The per-API counts a request and a response add to: proxy.ops.metrics.ApiMetrics.request and .answered done here,
 * on the object's own slots (read and set at the offsets of the class's member descriptors, found at configure: a
 * lookup by name costs as much as the bytecode it replaces), when the metrics are exactly that class (the proxy's);
 * any other object (a test's) has its methods called. tests/proxy/connection/test_responses_native.py holds the two to the same counts
 * (the proxy's ApiMetrics on both sides). */

#include "connection.h"

#include <structmember.h>

PyObject *ApiMetricsClass;          /* proxy.ops.metrics.ApiMetrics (configure) */
static double *Buckets;             /* proxy.ops.metrics.LATENCY_BUCKETS' bounds, ascending */
static Py_ssize_t BucketCount;
static PyObject *One;
static Py_ssize_t Requests, RequestBytes, ResponseBytes, LatencySum, LatencyCounts; /* the slots' offsets */
#define SLOT(o, offset) (*(PyObject **)((char *)(o) + (offset)))

/* The offset of the slot ``name`` of ``type`` (its member descriptor's), or -1 with an exception set. */
static Py_ssize_t slot_offset(PyObject *type, const char *name) {
    PyObject *descr = PyObject_GetAttrString(type, name);
    Py_ssize_t offset = -1;
    if (descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type) &&
        ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX)
        offset = ((PyMemberDescrObject *)descr)->d_member->offset;
    else if (descr != NULL)
        PyErr_Format(PyExc_TypeError, "ApiMetrics.%s is not a slot", name);
    Py_XDECREF(descr);
    return offset;
}

int counts_configure(PyObject *api_metrics_class, PyObject *buckets) {
    PyObject *bounds = PySequence_Tuple(buckets);
    if (bounds == NULL) return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(bounds);
    double *values = PyMem_New(double, n ? n : 1);
    if (values == NULL) {
        Py_DECREF(bounds);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        values[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(bounds, i));
        if (values[i] == -1.0 && PyErr_Occurred()) {
            PyMem_Free(values);
            Py_DECREF(bounds);
            return -1;
        }
    }
    Py_DECREF(bounds);
    if ((One == NULL && (One = PyLong_FromLong(1)) == NULL) ||
        (Requests = slot_offset(api_metrics_class, "requests")) < 0 ||
        (RequestBytes = slot_offset(api_metrics_class, "request_bytes")) < 0 ||
        (ResponseBytes = slot_offset(api_metrics_class, "response_bytes")) < 0 ||
        (LatencySum = slot_offset(api_metrics_class, "latency_sum")) < 0 ||
        (LatencyCounts = slot_offset(api_metrics_class, "latency_counts")) < 0) {
        PyMem_Free(values);
        return -1;
    }
    PyMem_Free(Buckets);
    Buckets = values;
    BucketCount = n;
    Py_INCREF(api_metrics_class);
    Py_XSETREF(ApiMetricsClass, api_metrics_class);
    return 0;
}

static int add_to(PyObject *object, Py_ssize_t offset, PyObject *more) { /* object.<slot> += more */
    PyObject *value = SLOT(object, offset);
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "an ApiMetrics count is not set");
        return -1;
    }
    PyObject *sum = PyNumber_Add(value, more);
    if (sum == NULL) return -1;
    Py_SETREF(SLOT(object, offset), sum);
    return 0;
}

int count_request(PyObject *metrics, PyObject *nbytes) {
    if (Py_TYPE(metrics) != (PyTypeObject *)ApiMetricsClass)
        return done(call_method(RequestName, metrics, nbytes, NULL, NULL, 2));
    if (add_to(metrics, Requests, One) < 0) return -1;
    return add_to(metrics, RequestBytes, nbytes);
}

int count_answered(PyObject *metrics, PyObject *nbytes, PyObject *seconds) {
    if (Py_TYPE(metrics) != (PyTypeObject *)ApiMetricsClass)
        return done(call_method(AnsweredName, metrics, nbytes, seconds, NULL, 3));
    if (add_to(metrics, ResponseBytes, nbytes) < 0 || add_to(metrics, LatencySum, seconds) < 0) return -1;
    double value = PyFloat_AsDouble(seconds);
    if (value == -1.0 && PyErr_Occurred()) return -1;
    Py_ssize_t bucket = 0; /* bisect_left: the first bound at least value (+Inf last) */
    while (bucket < BucketCount && Buckets[bucket] < value) bucket++;
    PyObject *counts = SLOT(metrics, LatencyCounts);
    if (counts == NULL) {
        PyErr_SetString(PyExc_AttributeError, "ApiMetrics.latency_counts is not set");
        return -1;
    }
    if (PyList_CheckExact(counts) && bucket < PyList_GET_SIZE(counts)) { /* the list's item, without a lookup */
        PyObject *more = PyNumber_Add(PyList_GET_ITEM(counts, bucket), One);
        if (more == NULL) return -1;
        PyObject *old = PyList_GET_ITEM(counts, bucket);
        PyList_SET_ITEM(counts, bucket, more);
        Py_DECREF(old);
        return 0;
    }
    Py_INCREF(counts);
    PyObject *count = PySequence_GetItem(counts, bucket);
    PyObject *more = count == NULL ? NULL : PyNumber_Add(count, One);
    Py_XDECREF(count);
    int failed = more == NULL ? -1 : PySequence_SetItem(counts, bucket, more);
    Py_XDECREF(more);
    Py_DECREF(counts);
    return failed;
}
