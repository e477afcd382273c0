/* quota.primitives._rate: quota.primitives.rate.PureRate in C, the same rate answering the same at every step.
 *
 * quota/primitives/rate.py makes its Rate a class over this type once, at import, when the extension is built and
 * KAFKA_QUOTA_PROXY_PURE_PYTHON is not set (else Rate is PureRate); PureRate stays the reference (tests/quota/primitives/
 * test_rate_native.py drives both through the same records, measurements and clock moves and compares every answer
 * and every field). Each method below mirrors the pure one of the same name.
 *
 * The samples are the pure class's array('d'): three doubles per slot (start, last event, value), at most num + 1
 * slots. Times are doubles here as there; so is the purge bound, which the pure class keeps as an int: the same
 * value and the same comparisons for any time below 2**53 ms (285,000 years) either side of 0. What the pure class
 * hands back as an int when the caller's time was an int (window_size_ms, the elapsed time of peek_with_window), this
 * hands back as an int too. A limit given as an int is multiplied as an int, then made a double, as Python's
 * int * int then int - float do. The held sum is a Python number as there: a float, or the int 0 that sum() gives of
 * no positive value, to which ints are then added exactly. Sums over the samples are Python's sum(): a plain loop
 * where it is one (below 3.12), the builtin itself where it compensates (3.12 on). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

#include "rate.h"

static PyObject *DefaultWindow; /* QuotaWindow(): Rate()'s window (configure) */
static PyObject *Builtins_sum;  /* builtins.sum, for the sums of 3.12 on */

#define CONFIGURED                                                                                                 \
    if (DefaultWindow == NULL) {                                                                                   \
        PyErr_SetString(PyExc_RuntimeError, "quota.primitives._rate is used through quota.primitives.rate");       \
        return NULL;                                                                                               \
    }

/* RateObject: rate.h (hot_paths.c reads it too) */

#define NEVER (-4611686018427387904.0) /* -(1 << 62): rate.py's _NEVER, exact as a double */
#define START 0
#define LAST 1
#define VALUE 2

/* -- numbers as Python computes them ------------------------------------------------------------------------- */

/* An int as float(int) makes it: exact below 2**53 (a clock's milliseconds, a count of bytes) without
 * PyLong_AsDouble's general path, correctly rounded (or OverflowError) above. */
static double int_as_double(PyObject *o) {
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (!overflow && v > -(1LL << 53) && v < (1LL << 53)) return (double)v;
    return PyLong_AsDouble(o);
}

/* A time: (its value as a double, whether it was an int). */
static int as_time(PyObject *o, double *out, int *is_int) {
    *is_int = PyLong_Check(o);
    *out = *is_int ? int_as_double(o) : PyFloat_AsDouble(o);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

/* A value as Python's float arithmetic takes it (an int made a double first). */
static int as_double(PyObject *o, double *out) {
    *out = PyFloat_CheckExact(o) ? PyFloat_AS_DOUBLE(o) : PyLong_Check(o) ? int_as_double(o) : PyFloat_AsDouble(o);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

/* limit * k as Python computes it, made a double where Python next mixes it with a float: a float limit times k,
 * or an int limit times the int k exactly (a double at once when it is exact, else Python's own product). */
static int scaled(PyObject *limit, double k, int k_is_int, double *out) {
    if (PyFloat_Check(limit)) {
        *out = PyFloat_AS_DOUBLE(limit) * k;
        return 0;
    }
    if (!PyLong_Check(limit) || !k_is_int) {
        double l;
        if (as_double(limit, &l) < 0) return -1;
        if (!PyLong_Check(limit)) {
            PyErr_Format(PyExc_TypeError, "a limit is an int or a float, got %.200s", Py_TYPE(limit)->tp_name);
            return -1;
        }
        *out = l * k; /* int * float: the int made a double first */
        return 0;
    }
    int overflow;
    long long l = PyLong_AsLongLongAndOverflow(limit, &overflow);
    if (l == -1 && PyErr_Occurred()) return -1;
    const long long exact = 1LL << 53;
    if (!overflow && l > -exact && l < exact && fabs(k) < 1048576.0 * 1048576.0) {
        double product = (double)l * k;
        if (fabs(product) < (double)exact) {
            *out = product;
            return 0;
        }
    }
    PyObject *kk = PyLong_FromDouble(k);
    if (kk == NULL) return -1;
    PyObject *product = PyNumber_Multiply(limit, kk);
    Py_DECREF(kk);
    if (product == NULL) return -1;
    *out = PyLong_AsDouble(product);
    Py_DECREF(product);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

/* Python's float floor division (float_floor_div), exact for the integral doubles a clock gives. */
static double floordiv(double vx, double wx) {
    double mod = fmod(vx, wx);
    double div = (vx - mod) / wx;
    if (mod) {
        if ((wx < 0) != (mod < 0)) div -= 1.0;
    }
    double floordiv;
    if (div) {
        floordiv = floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
        floordiv = copysign(0.0, vx / wx);
    }
    return floordiv;
}

/* _elapsed_ms: the elapsed time padded to num - 1 full windows, at least 1 ms. *one: max() picked the int 1. */
static double elapsed_ms(const RateObject *r, double elapsed, int *one) {
    double full = floordiv(elapsed, r->size_ms);
    if (full < r->min_full_windows) elapsed += (r->min_full_windows - full) * r->size_ms;
    *one = 1.0 > elapsed; /* max(elapsed, 1): the first unless 1 is greater */
    return *one ? 1.0 : elapsed;
}

/* The elapsed time as the pure class returns it: an int for an int time, else a float (or max()'s int 1). */
static PyObject *elapsed_object(double elapsed, int one, int is_int) {
    return (is_int || one) ? PyLong_FromDouble(elapsed) : PyFloat_FromDouble(elapsed);
}

/* sum() of the samples' values (positive_only: of those above 0), as the builtin gives it: an int 0 when there is
 * none, else a float. */
static PyObject *sum_object(const RateObject *r, int positive_only) {
#if PY_VERSION_HEX < 0x030C0000
    double total = 0.0;
    int any = 0;
    for (Py_ssize_t i = VALUE; i < r->len; i += 3) {
        if (!positive_only || r->s[i] > 0) {
            total += r->s[i];
            any = 1;
        }
    }
    return any ? PyFloat_FromDouble(total) : PyLong_FromLong(0);
#else
    PyObject *values = PyList_New(0);
    if (values == NULL) return NULL;
    for (Py_ssize_t i = VALUE; i < r->len; i += 3) {
        if (positive_only && !(r->s[i] > 0)) continue;
        PyObject *v = PyFloat_FromDouble(r->s[i]);
        if (v == NULL || PyList_Append(values, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(values);
            return NULL;
        }
        Py_DECREF(v);
    }
    PyObject *total = PyObject_CallOneArg(Builtins_sum, values);
    Py_DECREF(values);
    return total;
#endif
}

/* sum_object as a double. */
static int sum_values(const RateObject *r, int positive_only, double *out) {
#if PY_VERSION_HEX < 0x030C0000
    double total = 0.0;
    for (Py_ssize_t i = VALUE; i < r->len; i += 3)
        if (!positive_only || r->s[i] > 0) total += r->s[i];
    *out = total;
    return 0;
#else
    PyObject *total = sum_object(r, positive_only);
    if (total == NULL) return -1;
    *out = PyFloat_AsDouble(total);
    Py_DECREF(total);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
#endif
}

static double min_of(const RateObject *r, int field) {
    double m = r->s[field];
    for (Py_ssize_t i = field + 3; i < r->len; i += 3)
        if (r->s[i] < m) m = r->s[i];
    return m;
}

/* -- the samples --------------------------------------------------------------------------------------------- */

static int append(RateObject *r, double start, double last, double value) {
    if (r->len + 3 > r->cap) {
        Py_ssize_t most = 3 * (Py_ssize_t)(r->num + 1), cap = r->cap ? 2 * r->cap : 3 * 4;
        cap = cap > most ? most : cap;
        double *s = PyMem_Realloc(r->s, sizeof(double) * (size_t)cap);
        if (s == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        r->s = s;
        r->cap = cap;
    }
    r->s[r->len] = start;
    r->s[r->len + 1] = last;
    r->s[r->len + 2] = value;
    r->len += 3;
    return 0;
}

static int count_held(RateObject *r) {
    PyObject *held = sum_object(r, 1);
    if (held == NULL) return -1;
    Py_SETREF(r->held, held);
    return 0;
}

/* held += value, as Python adds: a float held and an int or float value in doubles; an int held as ints do. */
static int add_held(RateObject *r, PyObject *value, double v) {
    PyObject *sum = PyFloat_CheckExact(r->held) ? PyFloat_FromDouble(PyFloat_AS_DOUBLE(r->held) + v)
                                                : PyNumber_Add(r->held, value);
    if (sum == NULL) return -1;
    Py_SETREF(r->held, sum);
    return 0;
}

static int advance(RateObject *r, double now, Py_ssize_t *slot) {
    Py_ssize_t current = r->current = (Py_ssize_t)((r->current + 1) % (r->num + 1));
    Py_ssize_t i = current * 3;
    if (i >= r->len) {
        if (append(r, now, now, 0.0) < 0) return -1;
    } else {
        r->s[i] = r->s[i + LAST] = now;
        r->s[i + VALUE] = 0.0;
        if (count_held(r) < 0) return -1;
    }
    *slot = i;
    return 0;
}

static int purge(RateObject *r, double now) {
    if (now < r->fresh_until || r->len == 0) return 0;
    double oldest_last = trunc(min_of(r, LAST));
    if (now - oldest_last < r->span_ms) {
        r->fresh_until = oldest_last + r->span_ms;
        return 0;
    }
    for (Py_ssize_t i = 0; i < r->len; i += 3) {
        if (now - r->s[i + LAST] >= r->span_ms) {
            r->s[i] = r->s[i + LAST] = now;
            r->s[i + VALUE] = 0.0;
        }
    }
    return count_held(r);
}

static int add(RateObject *r, PyObject *value_object, double value, double now) {
    if (r->len == 0 && append(r, now, now, 0.0) < 0) return -1;
    Py_ssize_t i = r->current * 3;
    if (now - r->s[i] >= r->size_ms && advance(r, now, &i) < 0) return -1;
    r->s[i + VALUE] += value;
    r->s[i + LAST] = now;
    if (value > 0 && add_held(r, value_object, value) < 0) return -1;
    if (now < r->fresh_until - r->span_ms) r->fresh_until = now + r->span_ms;
    return 0;
}

/* least - held - (least + held) * 1e-6 with least = limit * (num - 1) * size_seconds, as Python computes it:
 * in doubles for a float held (the usual), with Python's own numbers for an int held. */
static PyObject *floor_object(RateObject *r, PyObject *limit) {
    if (PyFloat_CheckExact(r->held)) {
        double least, held = PyFloat_AS_DOUBLE(r->held);
        if (scaled(limit, (double)r->least_seconds, 1, &least) < 0) return NULL;
        return PyFloat_FromDouble(least - held - (least + held) * 1e-6);
    }
    PyObject *k = PyLong_FromLongLong(r->least_seconds), *millionth = PyFloat_FromDouble(1e-6), *result = NULL;
    PyObject *least = k == NULL ? NULL : PyNumber_Multiply(limit, k);
    PyObject *less = least == NULL ? NULL : PyNumber_Subtract(least, r->held);
    PyObject *both = least == NULL ? NULL : PyNumber_Add(least, r->held);
    PyObject *margin = both == NULL || millionth == NULL ? NULL : PyNumber_Multiply(both, millionth);
    if (less != NULL && margin != NULL) result = PyNumber_Subtract(less, margin);
    Py_XDECREF(k);
    Py_XDECREF(millionth);
    Py_XDECREF(least);
    Py_XDECREF(less);
    Py_XDECREF(both);
    Py_XDECREF(margin);
    return result;
}

static int within(RateObject *r, PyObject *limit, int *answer) {
    if (PyFloat_CheckExact(r->held)) { /* floor_object's first case, without making the float */
        double least, held = PyFloat_AS_DOUBLE(r->held);
        if (scaled(limit, (double)r->least_seconds, 1, &least) < 0) return -1;
        *answer = least - held - (least + held) * 1e-6 >= 0;
        return 0;
    }
    PyObject *floor = floor_object(r, limit), *zero = PyLong_FromLong(0);
    *answer = floor == NULL || zero == NULL ? -1 : PyObject_RichCompareBool(floor, zero, Py_GE);
    Py_XDECREF(floor);
    Py_XDECREF(zero);
    return *answer < 0 ? -1 : 0;
}

/* What quota.primitives.native.hot_paths calls: record_within's and headroom_floor's steps on numbers already read. */
int rate_record_within(RateObject *r, PyObject *value, PyObject *now, PyObject *limit, int *answer) {
    double v, t;
    int is_int;
    if (as_double(value, &v) < 0 || as_time(now, &t, &is_int) < 0 || add(r, value, v, t) < 0 || purge(r, t) < 0)
        return -1;
    return within(r, limit, answer);
}

PyObject *rate_headroom_floor(RateObject *r, PyObject *limit) { return floor_object(r, limit); }

/* -- the type ------------------------------------------------------------------------------------------------ */

static int read_ll(PyObject *window, const char *name, long long *out) {
    PyObject *v = PyObject_GetAttrString(window, name);
    if (v == NULL) return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int set_window(RateObject *r, PyObject *window) {
    long long num, size_seconds;
    if (read_ll(window, "num", &num) < 0 || read_ll(window, "size_seconds", &size_seconds) < 0) return -1;
    if (num < 1 || num >= (1LL << 31) || size_seconds < 1 || size_seconds >= (1LL << 40)) {
        PyErr_SetString(PyExc_ValueError, "a QuotaWindow's num (below 2**31) and size_seconds (below 2**40) are >= 1");
        return -1;
    }
    Py_INCREF(window);
    Py_XSETREF(r->window, window);
    r->num = num;
    r->size_ms = (double)(size_seconds * 1000);
    r->span_ms = (double)num * r->size_ms;
    r->min_full_windows = (double)(num - 1);
    r->least_seconds = (num - 1) * size_seconds;
    r->len = 0;
    r->current = 0;
    PyObject *zero = PyFloat_FromDouble(0.0);
    if (zero == NULL) return -1;
    Py_XSETREF(r->held, zero);
    r->fresh_until = NEVER;
    return 0;
}

static int Rate_init(RateObject *r, PyObject *args, PyObject *kwds) {
    static char *keywords[] = {"window", NULL};
    PyObject *window = NULL;
    if (DefaultWindow == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "quota.primitives._rate is used through quota.primitives.rate");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:Rate", keywords, &window)) return -1;
    return set_window(r, window == NULL ? DefaultWindow : window);
}

static PyObject *Rate_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    RateObject *r = (RateObject *)type->tp_alloc(type, 0);
    if (r == NULL) return NULL;
    r->fresh_until = NEVER;
    r->held = PyFloat_FromDouble(0.0); /* as __init__ leaves it: never NULL */
    if (r->held == NULL) {
        Py_DECREF(r);
        return NULL;
    }
    return (PyObject *)r;
}

static void Rate_dealloc(RateObject *r) {
    Py_XDECREF(r->window);
    Py_XDECREF(r->held);
    PyMem_Free(r->s);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

/* The arguments by name, as the pure method takes them: positional ones, then keywords (METH_FASTCALL |
 * METH_KEYWORDS); the same TypeError's for too many, unknown, repeated or missing ones. */
static int parse(const char *method, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                 const char *const *names, Py_ssize_t n, PyObject **out) {
    if (nargs > n) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd positional arguments but %zd were given", method, n, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) out[i] = i < nargs ? args[i] : NULL;
    Py_ssize_t given = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < given; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t j = 0;
        while (j < n && PyUnicode_CompareWithASCIIString(name, names[j]) != 0) j++;
        if (j == n) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", method, name);
            return -1;
        }
        if (out[j] != NULL) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", method, names[j]);
            return -1;
        }
        out[j] = args[nargs + k];
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (out[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument: '%s'", method, names[i]);
            return -1;
        }
    }
    return 0;
}

#define ARGS(method, ...)                                                                                          \
    static const char *const names[] = {__VA_ARGS__};                                                              \
    enum { N = sizeof(names) / sizeof(names[0]) };                                                                 \
    PyObject *const *a = args; /* all by position (the usual call): as given */                                   \
    PyObject *named[N];                                                                                            \
    if (kwnames != NULL || nargs != N) {                                                                           \
        if (parse(method, args, nargs, kwnames, names, N, named) < 0) return NULL;                                 \
        a = named;                                                                                                 \
    }
#define SIGNATURE PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames

static PyObject *Rate_record(RateObject *r, SIGNATURE) {
    ARGS("record", "value", "now_ms");
    double value, now;
    int is_int;
    if (as_double(a[0], &value) < 0 || as_time(a[1], &now, &is_int) < 0 || add(r, a[0], value, now) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Rate_record_within(RateObject *r, SIGNATURE) {
    ARGS("record_within", "value", "now_ms", "limit");
    double value, now;
    int is_int, answer;
    if (as_double(a[0], &value) < 0 || as_time(a[1], &now, &is_int) < 0 || add(r, a[0], value, now) < 0 ||
        purge(r, now) < 0 || within(r, a[2], &answer) < 0)
        return NULL;
    return PyBool_FromLong(answer);
}

static PyObject *Rate_surely_within(RateObject *r, SIGNATURE) {
    ARGS("surely_within", "limit", "now_ms");
    double now;
    int is_int, answer;
    if (as_time(a[1], &now, &is_int) < 0 || purge(r, now) < 0 || within(r, a[0], &answer) < 0) return NULL;
    return PyBool_FromLong(answer);
}

static PyObject *Rate_headroom_floor(RateObject *r, SIGNATURE) {
    ARGS("headroom_floor", "limit");
    PyObject *limit = a[0];
    return floor_object(r, limit);
}

static PyObject *Rate_purge_obsolete_samples(RateObject *r, SIGNATURE) {
    ARGS("_purge_obsolete_samples", "now_ms");
    PyObject *now_ms = a[0];
    double now;
    int is_int;
    if (as_time(now_ms, &now, &is_int) < 0 || purge(r, now) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Rate_count_held(RateObject *r, PyObject *unused) {
    if (count_held(r) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Rate_total(RateObject *r, SIGNATURE) {
    ARGS("total", "now_ms");
    PyObject *now_ms = a[0];
    double now, total;
    int is_int;
    if (as_time(now_ms, &now, &is_int) < 0 || purge(r, now) < 0 || sum_values(r, 0, &total) < 0) return NULL;
    if (r->len == 0) return PyLong_FromLong(0); /* sum() of no samples */
    return PyFloat_FromDouble(total);
}

static PyObject *Rate_window_size_ms(RateObject *r, SIGNATURE) {
    ARGS("window_size_ms", "now_ms");
    PyObject *now_ms = a[0];
    double now;
    int is_int, one;
    if (as_time(now_ms, &now, &is_int) < 0 || purge(r, now) < 0) return NULL;
    if (r->len == 0 && append(r, now, now, 0.0) < 0) return NULL; /* as SampledStat.oldest() does */
    double elapsed = elapsed_ms(r, now - trunc(min_of(r, START)), &one);
    return elapsed_object(elapsed, one, is_int);
}

static PyObject *Rate_headroom(RateObject *r, SIGNATURE) {
    ARGS("headroom", "limit", "now_ms");
    double now, window_ms, scaled_limit, total;
    int is_int, one;
    if (as_time(a[1], &now, &is_int) < 0) return NULL;
    if (r->len == 0 ? append(r, now, now, 0.0) < 0 : now >= r->fresh_until && purge(r, now) < 0) return NULL;
    window_ms = elapsed_ms(r, now - trunc(min_of(r, START)), &one);
    if (scaled(a[0], window_ms, is_int || one, &scaled_limit) < 0 || sum_values(r, 0, &total) < 0) return NULL;
    return PyFloat_FromDouble(scaled_limit / 1000.0 - total);
}

static PyObject *Rate_measure(RateObject *r, SIGNATURE) {
    ARGS("measure", "now_ms");
    PyObject *now_ms = a[0];
    double now, total;
    int is_int, one;
    if (as_time(now_ms, &now, &is_int) < 0) return NULL;
    if ((r->len == 0 && append(r, now, now, 0.0) < 0) || purge(r, now) < 0 || sum_values(r, 0, &total) < 0) return NULL;
    double oldest_start = min_of(r, START);
    if (now < oldest_start) oldest_start = now;
    double elapsed = elapsed_ms(r, now - trunc(oldest_start), &one);
    return PyFloat_FromDouble(total / (elapsed / 1000.0));
}

static PyObject *Rate_peek_with_window(RateObject *r, SIGNATURE) {
    ARGS("peek_with_window", "now_ms");
    PyObject *now_ms = a[0];
    double now;
    int is_int, one;
    if (as_time(now_ms, &now, &is_int) < 0) return NULL;
    double total = 0.0, oldest_start = now;
    for (Py_ssize_t i = 0; i < r->len; i += 3) {
        if (now - r->s[i + LAST] < r->span_ms) {
            total += r->s[i + VALUE];
            if (r->s[i] < oldest_start) oldest_start = r->s[i];
        }
    }
    double elapsed = elapsed_ms(r, now - trunc(oldest_start), &one);
    PyObject *rate = PyFloat_FromDouble(total / (elapsed / 1000.0));
    PyObject *window = elapsed_object(elapsed, one, is_int);
    if (rate == NULL || window == NULL) {
        Py_XDECREF(rate);
        Py_XDECREF(window);
        return NULL;
    }
    PyObject *pair = PyTuple_Pack(2, rate, window);
    Py_DECREF(rate);
    Py_DECREF(window);
    return pair;
}

static PyObject *Rate_peek(RateObject *r, SIGNATURE) {
    ARGS("peek", "now_ms");
    PyObject *pair = Rate_peek_with_window(r, a, 1, NULL);
    if (pair == NULL) return NULL;
    PyObject *rate = PyTuple_GET_ITEM(pair, 0);
    Py_INCREF(rate);
    Py_DECREF(pair);
    return rate;
}

/* (int(start), int(last), value) of slot i. */
static PyObject *sample_tuple(const RateObject *r, Py_ssize_t i) {
    return Py_BuildValue("(NNd)", PyLong_FromDouble(r->s[i]), PyLong_FromDouble(r->s[i + LAST]), r->s[i + VALUE]);
}

static PyObject *Rate_samples(RateObject *r, SIGNATURE) {
    ARGS("samples", "now_ms");
    PyObject *now_ms = a[0];
    double now;
    int is_int;
    if (as_time(now_ms, &now, &is_int) < 0) return NULL;
    PyObject *found = PyList_New(0);
    if (found == NULL) return NULL;
    for (Py_ssize_t i = 0; i < r->len; i += 3) {
        if (!(now - r->s[i + LAST] < r->span_ms && r->s[i + VALUE] != 0.0)) continue;
        PyObject *sample = sample_tuple(r, i);
        if (sample == NULL || PyList_Append(found, sample) < 0) {
            Py_XDECREF(sample);
            Py_DECREF(found);
            return NULL;
        }
        Py_DECREF(sample);
    }
    if (PyList_Sort(found) < 0) {
        Py_DECREF(found);
        return NULL;
    }
    return found;
}

/* seed: the usable samples found as the pure method finds them (Python's own comparisons, int(), float() and sort),
 * then taken in, or their sum recorded. */
static PyObject *Rate_seed(RateObject *r, SIGNATURE) {
    ARGS("seed", "samples", "now_ms");
    PyObject *now_ms = a[1], *usable = PyList_New(0), *iter = PyObject_GetIter(a[0]), *item;
    if (usable == NULL || iter == NULL) goto fail;
    while ((item = PyIter_Next(iter)) != NULL) {
        PyObject *parts = PySequence_Tuple(item);
        Py_DECREF(item);
        if (parts == NULL) goto fail;
        if (PyTuple_GET_SIZE(parts) != 3) {
            PyErr_Format(PyExc_ValueError, "a sample is (start, last event, value), got %zd values",
                         PyTuple_GET_SIZE(parts));
            Py_DECREF(parts);
            goto fail;
        }
        PyObject *start = PyTuple_GET_ITEM(parts, 0), *last = PyTuple_GET_ITEM(parts, 1);
        int ok = PyObject_RichCompareBool(start, last, Py_LE);
        if (ok > 0) ok = PyObject_RichCompareBool(last, now_ms, Py_LE);
        if (ok > 0) {
            PyObject *sample = Py_BuildValue("(NNN)", PyNumber_Long(start), PyNumber_Long(last),
                                             PyNumber_Float(PyTuple_GET_ITEM(parts, 2)));
            ok = sample == NULL || PyList_Append(usable, sample) < 0 ? -1 : 0;
            Py_XDECREF(sample);
        }
        Py_DECREF(parts);
        if (ok < 0) goto fail;
    }
    if (PyErr_Occurred() || PyList_Sort(usable) < 0) goto fail;
    Py_ssize_t n = PyList_GET_SIZE(usable), keep = (Py_ssize_t)(r->num + 1);
    if (n > keep && PyList_SetSlice(usable, 0, n - keep, NULL) < 0) goto fail;
    n = PyList_GET_SIZE(usable);
    if (n == 0) goto done;
    if (r->len) { /* recorded already: their sum, now */
        double value, now;
        int is_int;
        PyObject *values = PyList_New(n);
        if (values == NULL) goto fail;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *v = PyTuple_GET_ITEM(PyList_GET_ITEM(usable, i), 2);
            Py_INCREF(v);
            PyList_SET_ITEM(values, i, v);
        }
        PyObject *total = PyObject_CallOneArg(Builtins_sum, values);
        Py_DECREF(values);
        if (total == NULL) goto fail;
        int failed = as_double(total, &value) < 0 || as_time(now_ms, &now, &is_int) < 0 || add(r, total, value, now) < 0;
        Py_DECREF(total);
        if (failed) goto fail;
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *sample = PyList_GET_ITEM(usable, i);
        double start, last, value;
        int is_int;
        if (as_time(PyTuple_GET_ITEM(sample, 0), &start, &is_int) < 0 ||
            as_time(PyTuple_GET_ITEM(sample, 1), &last, &is_int) < 0 || as_double(PyTuple_GET_ITEM(sample, 2), &value) < 0)
            goto fail;
        if (append(r, start, last, value) < 0) goto fail;
    }
    r->current = n - 1;
    if (count_held(r) < 0) goto fail;
done:
    Py_DECREF(iter);
    Py_DECREF(usable);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(iter);
    Py_XDECREF(usable);
    return NULL;
}

static PyObject *samples_list(const RateObject *r) {
    PyObject *samples = PyList_New(r->len / 3);
    if (samples == NULL) return NULL;
    for (Py_ssize_t i = 0; i < r->len; i += 3) {
        PyObject *sample = sample_tuple(r, i);
        if (sample == NULL) {
            Py_DECREF(samples);
            return NULL;
        }
        PyList_SET_ITEM(samples, i / 3, sample);
    }
    return samples;
}

/* A rate made by __new__ alone has no window until __init__: what reads the window says so. */
#define INITIALISED(r)                                                                                             \
    if ((r)->window == NULL) {                                                                                     \
        PyErr_SetString(PyExc_RuntimeError, "a Rate not initialised (no window)");                                \
        return NULL;                                                                                               \
    }

static PyObject *Rate_repr(RateObject *r) {
    INITIALISED(r);
    PyObject *samples = samples_list(r);
    if (samples == NULL) return NULL;
    PyObject *text = PyUnicode_FromFormat("Rate(window=%R, samples(start_ms, last_event_ms, value)=%R)", r->window,
                                          samples);
    Py_DECREF(samples);
    return text;
}

/* The doubles as they are: (window, [start, last, value, ...], current, held, fresh_until). */
static PyObject *Rate_reduce(RateObject *r, PyObject *unused) {
    INITIALISED(r);
    PyObject *s = PyList_New(r->len);
    if (s == NULL) return NULL;
    for (Py_ssize_t i = 0; i < r->len; i++) {
        PyObject *v = PyFloat_FromDouble(r->s[i]);
        if (v == NULL) {
            Py_DECREF(s);
            return NULL;
        }
        PyList_SET_ITEM(s, i, v);
    }
    return Py_BuildValue("(O(O)(NnOd))", Py_TYPE(r), r->window, s, r->current, r->held, r->fresh_until);
}

static PyObject *Rate_setstate(RateObject *r, PyObject *state) {
    PyObject *s;
    Py_ssize_t current;
    PyObject *held;
    double fresh_until;
    if (!PyArg_ParseTuple(state, "O!nOd:__setstate__", &PyList_Type, &s, &current, &held, &fresh_until)) return NULL;
    if (!PyFloat_CheckExact(held) && !PyLong_CheckExact(held)) {
        PyErr_SetString(PyExc_TypeError, "a rate's held sum is an int or a float");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(s);
    if (n % 3 || n > 3 * (r->num + 1) || current < 0 || (n && current >= n / 3)) {
        PyErr_SetString(PyExc_ValueError, "not the state of a rate of this window");
        return NULL;
    }
    r->len = 0;
    for (Py_ssize_t i = 0; i < n; i += 3) {
        double v[3];
        for (int k = 0; k < 3; k++)
            if (as_double(PyList_GET_ITEM(s, i + k), &v[k]) < 0) return NULL;
        if (append(r, v[0], v[1], v[2]) < 0) return NULL;
    }
    r->current = current;
    Py_INCREF(held);
    Py_SETREF(r->held, held);
    r->fresh_until = fresh_until;
    Py_RETURN_NONE;
}

/* -- what tests and the differential compare: the pure class's fields ------------------------------------------ */

static PyObject *get_s(RateObject *r, void *unused) {
    PyObject *array = PyImport_ImportModule("array");
    if (array == NULL) return NULL;
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)r->s, (Py_ssize_t)(sizeof(double) * (size_t)r->len));
    PyObject *copy = bytes == NULL ? NULL : PyObject_CallMethod(array, "array", "sO", "d", bytes);
    Py_XDECREF(bytes);
    Py_DECREF(array);
    return copy;
}

/* An integral double as an int, as the pure class holds its bound (a float only after a time given as a float). */
static PyObject *number(double v) {
    return (isfinite(v) && v == floor(v)) ? PyLong_FromDouble(v) : PyFloat_FromDouble(v);
}

static PyObject *get_fresh_until(RateObject *r, void *unused) { return number(r->fresh_until); }

static int set_fresh_until(RateObject *r, PyObject *value, void *unused) {
    int is_int;
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "_fresh_until cannot be deleted");
        return -1;
    }
    return as_time(value, &r->fresh_until, &is_int);
}

static PyObject *get_held(RateObject *r, void *unused) {
    INITIALISED(r);
    Py_INCREF(r->held);
    return r->held;
}
static PyObject *get_current(RateObject *r, void *unused) { return PyLong_FromSsize_t(r->current); }
static PyObject *get_sample_count(RateObject *r, void *unused) { return PyLong_FromSsize_t(r->len / 3); }
static PyObject *get_window(RateObject *r, void *unused) {
    INITIALISED(r);
    Py_INCREF(r->window);
    return r->window;
}
static PyObject *get_shape(RateObject *r, void *unused) {
    return Py_BuildValue("(LLLL)", (long long)r->size_ms, (long long)r->span_ms, (long long)r->min_full_windows,
                         r->least_seconds);
}

static PyGetSetDef getset[] = {
    {"window", (getter)get_window, NULL, "the QuotaWindow", NULL},
    {"sample_count", (getter)get_sample_count, NULL, "samples held so far (at most num + 1)", NULL},
    {"_s", (getter)get_s, NULL, "a copy of the samples, as the pure class's array('d')", NULL},
    {"_current", (getter)get_current, NULL, "the slot of the current sample", NULL},
    {"_held", (getter)get_held, NULL, "at least the sum of the samples' positive values", NULL},
    {"_fresh_until", (getter)get_fresh_until, (setter)set_fresh_until, "no sample is obsolete before this", NULL},
    {"_shape", (getter)get_shape, NULL, "(size_ms, span_ms, num - 1, (num - 1) * size_seconds)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

#define METHOD(name, doc) {#name, (PyCFunction)(void (*)(void))Rate_##name, METH_FASTCALL | METH_KEYWORDS, doc}
static PyMethodDef rate_methods[] = {
    METHOD(record, "PureRate.record"),
    METHOD(record_within, "PureRate.record_within"),
    METHOD(surely_within, "PureRate.surely_within"),
    METHOD(headroom_floor, "PureRate.headroom_floor"),
    METHOD(total, "PureRate.total"),
    METHOD(window_size_ms, "PureRate.window_size_ms"),
    METHOD(headroom, "PureRate.headroom"),
    METHOD(measure, "PureRate.measure"),
    METHOD(peek, "PureRate.peek"),
    METHOD(peek_with_window, "PureRate.peek_with_window"),
    METHOD(samples, "PureRate.samples"),
    METHOD(seed, "PureRate.seed"),
    {"_purge_obsolete_samples", (PyCFunction)(void (*)(void))Rate_purge_obsolete_samples, METH_FASTCALL | METH_KEYWORDS,
     "PureRate._purge_obsolete_samples"},
    {"_count_held", (PyCFunction)Rate_count_held, METH_NOARGS, "PureRate._count_held"},
    {"__reduce__", (PyCFunction)Rate_reduce, METH_NOARGS, "for copy and pickle"},
    {"__setstate__", (PyCFunction)Rate_setstate, METH_O, "for copy and pickle"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject RateType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "quota.primitives._rate.Rate",
    .tp_basicsize = sizeof(RateObject),
    .tp_dealloc = (destructor)Rate_dealloc,
    .tp_repr = (reprfunc)Rate_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, /* quota.primitives.rate.Rate is a Python class over it */
    .tp_doc = "quota.primitives.rate.PureRate in C: Kafka's sampled-window rate.",
    .tp_methods = rate_methods,
    .tp_getset = getset,
    .tp_init = (initproc)Rate_init,
    .tp_new = Rate_new,
};

/* configure(QuotaWindow()): the default window, once, from quota.primitives.rate. */
static PyObject *configure(PyObject *module, PyObject *window) {
    Py_INCREF(window);
    Py_XSETREF(DefaultWindow, window);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"configure", configure, METH_O, "the default window (quota.primitives.rate hands it over at import)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rate", "Kafka's sampled-window rate in C (quota.primitives.rate.PureRate's twin).", -1,
    module_methods,        NULL,    NULL,
    NULL,                  NULL};

PyMODINIT_FUNC PyInit__rate(void) {
    PyObject *builtins = PyEval_GetBuiltins(); /* borrowed */
    Builtins_sum = builtins == NULL ? NULL : PyDict_GetItemString(builtins, "sum");
    if (Builtins_sum == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ImportError, "builtins.sum not found");
        return NULL;
    }
    Py_INCREF(Builtins_sum);
    if (PyType_Ready(&RateType) < 0) return NULL;
    PyObject *created = PyModule_Create(&module);
    if (created == NULL) return NULL;
    Py_INCREF(&RateType);
    if (PyModule_AddObject(created, "Rate", (PyObject *)&RateType) < 0) {
        Py_DECREF(&RateType);
        Py_DECREF(created);
        return NULL;
    }
    if (add_hot_paths(created) < 0) {
        Py_DECREF(created);
        return NULL;
    }
    return created;
}
