/* The sampled rate's C state (rate.c) and what the manager's hot paths (hot_paths.c) call of it. */
#ifndef QUOTA_RATE_H
#define QUOTA_RATE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    PyObject_HEAD
    PyObject *window;
    double *s;          /* slot after slot: start, last event, value */
    Py_ssize_t len;     /* doubles held: 3 per sample */
    Py_ssize_t cap;     /* doubles room is made for (grown as the pure class's array grows, up to num + 1 slots) */
    Py_ssize_t current; /* the slot of the current sample */
    long long num;      /* window.num: num + 1 slots at most */
    double size_ms, span_ms, min_full_windows; /* _shape's first three */
    long long least_seconds;                   /* _shape's fourth: (num - 1) * size_seconds */
    PyObject *held; /* _held: a float, or an int as the pure class's (sum() of no positive value, then ints added) */
    double fresh_until;                        /* _fresh_until */
} RateObject;

extern PyTypeObject RateType;

/* Rate.record_within(value, now, limit)'s steps: 0 and *answer, or -1 with an exception set. */
int rate_record_within(RateObject *r, PyObject *value, PyObject *now, PyObject *limit, int *answer);
/* Rate.headroom_floor(limit): a new reference, or NULL with an exception set. */
PyObject *rate_headroom_floor(RateObject *r, PyObject *limit);
/* hot_paths.c: the HotPaths type and configure_hot_paths added to the module. */
int add_hot_paths(PyObject *module);

#endif
