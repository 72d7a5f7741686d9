/* The partition's loop over the classes of one projection, in C (cpc.partition.parts).
 *
 * classes_meeting(leq, x, x_first, ys, pair, out, whole, inter, rest, ry_of):
 *     for each projection y of ys (the other group's projections that make classes with
 *     projection x), the classes pair[(x, y)] (pair[(y, x)] when not x_first) are added to
 *     out as (class, None, whole):
 *     - with whole True or False, every one of them, with that flag;
 *     - with whole None, those whose region x ∧ y meets inter (x's headers in the region
 *       that moves): whole is then whether it misses rest (x's other headers).
 *     The tests are CUDD's Cudd_bddLeq, called through the pointer that cpc.leq found
 *     (leq = (function address, manager, offset of the node in a dd Function, Function
 *     type)): no BDD is built, and no Python call is made per test.
 *
 * tests/cpc/test_leqc.py checks it against the Python loop it replaces on random regions.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef int (*leq_fn)(void *manager, void *f, void *g);

typedef struct {
    leq_fn leq;
    void *manager;
    Py_ssize_t node_at;
    PyTypeObject *function;
} Leq;

static int
parse_leq(PyObject *t, Leq *out)
{
    unsigned long long fn, mgr;
    PyObject *ftype;
    if (!PyArg_ParseTuple(t, "KKnO!", &fn, &mgr, &out->node_at, &PyType_Type, &ftype))
        return -1;
    if (fn == 0 || mgr == 0 || out->node_at < (Py_ssize_t)sizeof(PyObject) ||
        out->node_at + (Py_ssize_t)sizeof(void *) > ((PyTypeObject *)ftype)->tp_basicsize) {
        PyErr_SetString(PyExc_ValueError, "leq: not a native Cudd_bddLeq and Function layout");
        return -1;
    }
    out->leq = (leq_fn)(uintptr_t)fn;
    out->manager = (void *)(uintptr_t)mgr;
    out->function = (PyTypeObject *)ftype;
    return 0;
}

/* The DdNode that a dd Function holds (referenced while the Function lives). */
static void *
node_of(const Leq *l, PyObject *u)
{
    if (!PyObject_TypeCheck(u, l->function)) {
        PyErr_Format(PyExc_TypeError, "expected a BDD, got %.100s", Py_TYPE(u)->tp_name);
        return NULL;
    }
    return *(void **)((char *)u + l->node_at);
}

/* u ∩ v = ∅: u ⊆ ¬v, ¬v being v's node with the complement bit. */
static int
disjoint(const Leq *l, void *u, void *v)
{
    return l->leq(l->manager, u, (void *)((uintptr_t)v ^ 1)) == 1;
}

/* Adds (c, None, whole) to out for every class c of pair[key]. 0, or -1 on error. */
static int
add_classes(PyObject *out, PyObject *pair, PyObject *key, int whole)
{
    PyObject *classes = PyDict_GetItemWithError(pair, key);
    if (classes == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, key);
        return -1;
    }
    PyObject *it = PyObject_GetIter(classes), *c;
    if (it == NULL)
        return -1;
    while ((c = PyIter_Next(it)) != NULL) {
        PyObject *t = PyTuple_Pack(3, c, Py_None, whole ? Py_True : Py_False);
        Py_DECREF(c);
        if (t == NULL || PyList_Append(out, t) < 0) {
            Py_XDECREF(t);
            Py_DECREF(it);
            return -1;
        }
        Py_DECREF(t);
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *
classes_meeting(PyObject *self, PyObject *args)
{
    PyObject *leq_args, *x, *ys, *pair, *out, *whole, *inter, *rest, *ry_of;
    int x_first;
    if (!PyArg_ParseTuple(args, "O!OpOO!O!OOOO", &PyTuple_Type, &leq_args, &x, &x_first, &ys,
                          &PyDict_Type, &pair, &PyList_Type, &out, &whole, &inter, &rest,
                          &ry_of))
        return NULL;
    Leq l;
    if (parse_leq(leq_args, &l) < 0)
        return NULL;
    int test = whole == Py_None;
    void *in_node = NULL, *rest_node = NULL;
    if (test) {
        if (!PyDict_Check(ry_of)) {
            PyErr_SetString(PyExc_TypeError, "ry_of must be a dict");
            return NULL;
        }
        in_node = node_of(&l, inter);
        rest_node = in_node ? node_of(&l, rest) : NULL;
        if (rest_node == NULL)
            return NULL;
    }
    int all = test ? 0 : PyObject_IsTrue(whole);
    if (all < 0)
        return NULL;
    PyObject *it = PyObject_GetIter(ys), *y;
    if (it == NULL)
        return NULL;
    while ((y = PyIter_Next(it)) != NULL) {
        int w = all, bad = 0;
        if (test) {
            PyObject *ry = PyDict_GetItemWithError(ry_of, y);
            void *yn = ry == NULL ? NULL : node_of(&l, ry);
            if (yn == NULL) {
                if (ry == NULL && !PyErr_Occurred())
                    PyErr_SetObject(PyExc_KeyError, y);
                Py_DECREF(y);
                Py_DECREF(it);
                return NULL;
            }
            if (disjoint(&l, in_node, yn)) {
                Py_DECREF(y);
                continue;
            }
            w = disjoint(&l, rest_node, yn);
        }
        PyObject *key = x_first ? PyTuple_Pack(2, x, y) : PyTuple_Pack(2, y, x);
        bad = key == NULL || add_classes(out, pair, key, w) < 0;
        Py_XDECREF(key);
        Py_DECREF(y);
        if (bad) {
            Py_DECREF(it);
            return NULL;
        }
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"classes_meeting", classes_meeting, METH_VARARGS,
     "classes_meeting(leq, x, x_first, ys, pair, out, whole, inter, rest, ry_of) -> None; "
     "appends (class, None, whole) to out (see the module's comment)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "cpc._leqc",
    "The partition's per-class disjointness tests, through CUDD's Cudd_bddLeq (cpc.partition).",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__leqc(void)
{
    return PyModule_Create(&module);
}
