/* The per-API counts a request and a response add to: proxy.ops.metrics.ApiMetrics.request and .answered done here,
 * on the object's own attributes (through GETATTR and SETATTR, connection.h: its slots, at their offsets), when the
 * metrics are exactly that class (the proxy's); any other object (a test's) has its methods called. tests/proxy/connection/test_responses_native.py holds the two to the same counts
 * (the proxy's ApiMetrics on both sides). */

#include "connection.h"


PyObject *ApiMetricsClass;          /* proxy.ops.metrics.ApiMetrics (configure) */
static double *Buckets;             /* proxy.ops.metrics.LATENCY_BUCKETS' bounds, ascending */
static Py_ssize_t BucketCount;
static PyObject *One;
static PyObject *RequestsName, *RequestBytesName, *ResponseBytesName, *LatencySumName, *LatencyCountsName;

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
    if (One == NULL &&
        ((One = PyLong_FromLong(1)) == NULL || (RequestsName = PyUnicode_InternFromString("requests")) == NULL ||
         (RequestBytesName = PyUnicode_InternFromString("request_bytes")) == NULL ||
         (ResponseBytesName = PyUnicode_InternFromString("response_bytes")) == NULL ||
         (LatencySumName = PyUnicode_InternFromString("latency_sum")) == NULL ||
         (LatencyCountsName = PyUnicode_InternFromString("latency_counts")) == NULL)) {
        Py_CLEAR(One); /* made again, with every name, at the next configure */
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

/* object.name += more, 0 or -1; a macro, so that each count has call sites (and attribute caches) of its own */
#define ADD_TO(object, name, more)                                                                                 \
    __extension__({                                                                                                \
        PyObject *value_ = GETATTR(object, name);                                                                  \
        PyObject *sum_ = value_ == NULL ? NULL : PyNumber_Add(value_, more);                                       \
        Py_XDECREF(value_);                                                                                        \
        int failed_ = sum_ == NULL ? -1 : SETATTR(object, name, sum_);                                             \
        Py_XDECREF(sum_);                                                                                          \
        failed_;                                                                                                   \
    })

int count_request(PyObject *metrics, PyObject *nbytes) {
    if (Py_TYPE(metrics) != (PyTypeObject *)ApiMetricsClass)
        return done(call_method(RequestName, metrics, nbytes, NULL, NULL, 2));
    if (ADD_TO(metrics, RequestsName, One) < 0) return -1;
    return ADD_TO(metrics, RequestBytesName, nbytes);
}

int count_answered(PyObject *metrics, PyObject *nbytes, PyObject *seconds) {
    if (Py_TYPE(metrics) != (PyTypeObject *)ApiMetricsClass)
        return done(call_method(AnsweredName, metrics, nbytes, seconds, NULL, 3));
    if (ADD_TO(metrics, ResponseBytesName, nbytes) < 0 || ADD_TO(metrics, LatencySumName, seconds) < 0) return -1;
    double value = PyFloat_AsDouble(seconds);
    if (value == -1.0 && PyErr_Occurred()) return -1;
    Py_ssize_t bucket = 0; /* bisect_left: the first bound at least value (+Inf last) */
    while (bucket < BucketCount && Buckets[bucket] < value) bucket++;
    PyObject *counts = GETATTR(metrics, LatencyCountsName);
    if (counts == NULL) return -1;
    if (PyList_CheckExact(counts) && bucket < PyList_GET_SIZE(counts)) { /* the list's item, without a lookup */
        PyObject *more = PyNumber_Add(PyList_GET_ITEM(counts, bucket), One);
        if (more != NULL) {
            PyObject *old = PyList_GET_ITEM(counts, bucket);
            PyList_SET_ITEM(counts, bucket, more);
            Py_DECREF(old);
        }
        Py_DECREF(counts);
        return more == NULL ? -1 : 0;
    }
    PyObject *count = PySequence_GetItem(counts, bucket);
    PyObject *more = count == NULL ? NULL : PyNumber_Add(count, One);
    Py_XDECREF(count);
    int failed = more == NULL ? -1 : PySequence_SetItem(counts, bucket, more);
    Py_XDECREF(more);
    Py_DECREF(counts);
    return failed;
}
