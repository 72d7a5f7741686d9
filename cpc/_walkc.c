/* The loops of cpc.walk that run for every class an update re-walks, in C.
 *
 * split_via(outcomes, links, entries, dpids, crosses): WalkResult.split_via's partition of
 *     a class walk into what stays valid and what must be walked again.
 * trie_find(trie, owners, leaf): the cross-class suffix memo's lookup (Walker._suffix);
 *     trie_add(trie, elems, actions, node, leaf), its store; merge_deps(frame, elems,
 *     actions), a linked node's elements into the dependencies of the node being walked.
 * memo_entries(switches, owners, ...): Walker._memo_entries, a re-walk's switches entered
 *     through stored nodes (what Walker._edge_switch does when the memo has them).
 * pairs(outcomes, links, entries, whole, redo): WalkResult.pairs, the (ingress, egress)
 *     pairs of a walk or of the paths a re-walk dropped (read by the daemon after every
 *     update).
 * entry_changes(old, new, by, old_rest, new_rest): cpc.index.pair_changes' comparison of
 *     two walks' shared entries switch by switch; same_objects(a, b), of their other paths.
 *
 * They only read Python objects that the walker made (tuples, lists, dicts, sets) and do
 * what the Python in cpc/walk.py's docstrings says, step for step; tests/cpc/test_walkc.py
 * and tests/cpc/test_model_vs_bruteforce.py check them against plain Python versions on
 * random inputs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* obj[i] for a tuple (named tuples included) or a list, borrowed. */
static PyObject *
item(PyObject *obj, Py_ssize_t i)
{
    if (PyTuple_Check(obj)) {
        if (0 <= i && i < PyTuple_GET_SIZE(obj))
            return PyTuple_GET_ITEM(obj, i);
    }
    else if (PyList_Check(obj)) {
        if (0 <= i && i < PyList_GET_SIZE(obj))
            return PyList_GET_ITEM(obj, i);
    }
    else {
        PyErr_Format(PyExc_TypeError, "expected a tuple or a list, got %.100s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    PyErr_SetString(PyExc_IndexError, "walk record too short");
    return NULL;
}

/* obj[i][j]... along a path of indexes, borrowed. */
static PyObject *
path(PyObject *obj, const Py_ssize_t *idx, int n)
{
    for (int k = 0; k < n && obj != NULL; k++)
        obj = item(obj, idx[k]);
    return obj;
}

static PyObject *str_dpids, *str_dpids_made; /* interned at import */

/* node.<made>, a value a node makes once and keeps (Node.dpids, egresses, first_ports), read
 * without a call once made; else node.<method>(). New reference, NULL on error. */
static PyObject *
made_or_call(PyObject *node, PyObject *made, PyObject *method)
{
    PyObject *x = PyObject_GetAttr(node, made);
    if (x == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return NULL;
        PyErr_Clear();
    }
    if (x == NULL || x == Py_None) {
        Py_XDECREF(x);
        x = PyObject_CallMethodNoArgs(node, method);
    }
    return x;
}

/* Whether node visits one of dpids (node.dpids() meets dpids), kept in crosses (node ->
 * bool). node._dpids, once made, is read without a call, and the smaller set is iterated
 * (dpids: the switches one update changed, mostly one). 1, 0, or -1 on error. */
static int
node_hits(PyObject *node, PyObject *dpids, PyObject *crosses)
{
    PyObject *hit = PyDict_GetItemWithError(crosses, node);
    if (hit != NULL)
        return PyObject_IsTrue(hit);
    if (PyErr_Occurred())
        return -1;
    PyObject *visits = made_or_call(node, str_dpids_made, str_dpids);
    if (visits == NULL)
        return -1;
    if (!PyAnySet_Check(visits)) {
        Py_DECREF(visits);
        PyErr_SetString(PyExc_TypeError, "a node's dpids must be a set or a frozenset");
        return -1;
    }
    PyObject *small = dpids, *big = visits;
    if (PySet_GET_SIZE(visits) < PySet_GET_SIZE(dpids)) {
        small = visits;
        big = dpids;
    }
    int meets = 0;
    PyObject *it = PyObject_GetIter(small), *d;
    if (it == NULL) {
        Py_DECREF(visits);
        return -1;
    }
    while (!meets && (d = PyIter_Next(it)) != NULL) {
        meets = PySet_Contains(big, d);
        Py_DECREF(d);
    }
    Py_DECREF(it);
    Py_DECREF(visits);
    if (meets < 0 || PyErr_Occurred())
        return -1;
    if (PyDict_SetItem(crosses, node, meets ? Py_True : Py_False) < 0)
        return -1;
    return meets;
}

/* any(h.dpid in dpids for h in hops). 1, 0, or -1 on error. */
static int
hops_hit(PyObject *hops, PyObject *dpids)
{
    if (!PyTuple_Check(hops)) {
        PyErr_SetString(PyExc_TypeError, "hops must be a tuple");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(hops); i++) {
        PyObject *dpid = item(PyTuple_GET_ITEM(hops, i), 0);
        if (dpid == NULL)
            return -1;
        int in = PySet_Contains(dpids, dpid);
        if (in != 0)
            return in;
    }
    return 0;
}

/* Whether a re-walk drops the paths from ingress ing: its switch is in whole, or it is in
 * redo. 1, 0, or -1 on error. */
static int
dropped_ingress(PyObject *ing, PyObject *whole, PyObject *redo)
{
    PyObject *sw = item(ing, 0);
    if (sw == NULL)
        return -1;
    /* An empty set answers without hashing the key (an ingress is a tuple: hashed anew). */
    int in = PySet_GET_SIZE(whole) ? PySet_Contains(whole, sw) : 0;
    return in == 0 && PySet_GET_SIZE(redo) ? PySet_Contains(redo, ing) : in;
}

/* Whether path x is dropped by a re-walk (dropped_ingress of its ingress, x[0]). 1, 0, or
 * -1 on error; *ing is set to the ingress. */
static int
gone(PyObject *x, PyObject *whole, PyObject *redo, PyObject **ing)
{
    *ing = item(x, 0);
    return *ing == NULL ? -1 : dropped_ingress(*ing, whole, redo);
}

/* Adds to redo the ingress (x[0]) of every path x of seq that does not start at a switch of
 * whole and visits dpids: on its hops (x[hops_at]) or in its node (x[node_at], none when
 * node_at < 0). 0, or -1 on error. */
static int
redo_paths(PyObject *seq, Py_ssize_t hops_at, Py_ssize_t node_at, PyObject *dpids,
           PyObject *crosses, PyObject *whole, PyObject *redo)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(seq); i++) {
        PyObject *x = PyList_GET_ITEM(seq, i), *ing;
        int dropped = gone(x, whole, redo, &ing);
        if (dropped < 0)
            return -1;
        if (dropped)
            continue;
        PyObject *hops = item(x, hops_at);
        PyObject *node = node_at < 0 ? Py_None : item(x, node_at);
        if (hops == NULL || node == NULL)
            return -1;
        int hit = node_at < 0 ? 0 : node_hits(node, dpids, crosses);
        if (hit == 0)
            hit = hops_hit(hops, dpids);
        if (hit < 0 || (hit && PySet_Add(redo, ing) < 0))
            return -1;
    }
    return 0;
}

static const Py_ssize_t ENTRY_SWITCH[] = {1, 0, 0, 0}; /* SharedEntry -> first ingress's dpid */

/* [x for x in seq if x[0][0] not in whole and x[0] not in redo] (ingress = x[0]); seq
 * itself when it keeps every path (a walk's lists are never changed once stored). */
static PyObject *
kept_paths(PyObject *seq, PyObject *whole, PyObject *redo)
{
    PyObject *out = NULL; /* made at the first path dropped */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(seq); i++) {
        PyObject *x = PyList_GET_ITEM(seq, i), *ing;
        int dropped = gone(x, whole, redo, &ing);
        if (dropped < 0)
            goto fail;
        if (dropped) {
            if (out == NULL && (out = PyList_GetSlice(seq, 0, i)) == NULL)
                goto fail;
        }
        else if (out != NULL && PyList_Append(out, x) < 0)
            goto fail;
    }
    return out == NULL ? Py_NewRef(seq) : out;
fail:
    Py_XDECREF(out);
    return NULL;
}

static PyObject *
split_via(PyObject *self, PyObject *args)
{
    PyObject *outcomes, *links, *entries, *dpids, *crosses;
    if (!PyArg_ParseTuple(args, "O!O!O!OO!", &PyList_Type, &outcomes, &PyList_Type, &links,
                          &PyList_Type, &entries, &dpids, &PyDict_Type, &crosses))
        return NULL;
    if (!PyAnySet_Check(dpids)) {
        PyErr_SetString(PyExc_TypeError, "dpids must be a set or a frozenset");
        return NULL;
    }
    PyObject *whole = PySet_New(NULL), *redo = PySet_New(NULL);
    PyObject *kept_o = NULL, *kept_l = NULL, *kept_e = NULL, *gone_e = NULL;
    if (whole == NULL || redo == NULL)
        goto fail;
    /* Entry nodes: a switch whose node visits dpids is walked again at every edge port. */
    Py_ssize_t hits = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); i++) {
        PyObject *e = PyList_GET_ITEM(entries, i);
        PyObject *node = item(e, 0);
        if (node == NULL)
            goto fail;
        int hit = node_hits(node, dpids, crosses);
        if (hit < 0)
            goto fail;
        if (hit) {
            PyObject *sw = path(e, ENTRY_SWITCH, 4);
            if (sw == NULL || PySet_Add(whole, sw) < 0)
                goto fail;
            hits++;
        }
    }
    /* Paths spelled out, then links to shared nodes (by the node: the same answers as
     * entries), walked again where they visit dpids. */
    if (redo_paths(outcomes, 3, -1, dpids, crosses, whole, redo) < 0 ||
        redo_paths(links, 1, 4, dpids, crosses, whole, redo) < 0)
        goto fail;
    if (PySet_GET_SIZE(whole) == 0 && PySet_GET_SIZE(redo) == 0)
        return Py_BuildValue("(NNOOON)", whole, redo, outcomes, links, entries, PyList_New(0));
    kept_o = kept_paths(outcomes, whole, redo);
    kept_l = kept_o ? kept_paths(links, whole, redo) : NULL;
    if (kept_l == NULL)
        goto fail;
    gone_e = PyList_New(0);
    if (gone_e == NULL)
        goto fail;
    if (hits == 0) { /* no entry goes: the list as it is (never changed once stored) */
        kept_e = Py_NewRef(entries);
    }
    else {
        kept_e = PyList_New(0);
        if (kept_e == NULL)
            goto fail;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); i++) {
            PyObject *e = PyList_GET_ITEM(entries, i);
            PyObject *sw = path(e, ENTRY_SWITCH, 4);
            if (sw == NULL)
                goto fail;
            int gone = PySet_Contains(whole, sw);
            if (gone < 0 || PyList_Append(gone ? gone_e : kept_e, e) < 0)
                goto fail;
        }
    }
    return Py_BuildValue("(NNNNNN)", whole, redo, kept_o, kept_l, kept_e, gone_e);
fail:
    Py_XDECREF(whole);
    Py_XDECREF(redo);
    Py_XDECREF(kept_o);
    Py_XDECREF(kept_l);
    Py_XDECREF(kept_e);
    Py_XDECREF(gone_e);
    return NULL;
}

static PyObject *str_egresses, *str_egresses_made; /* interned at import */

/* A node's egresses (Node.egresses()), read without a call once made (most nodes are asked
 * again and again). New reference. */
static PyObject *
node_egresses(PyObject *node)
{
    return made_or_call(node, str_egresses_made, str_egresses);
}


/* Whether the path from ingress ing is counted: every path when whole is NULL, else those
 * that a re-walk dropped. 1, 0, or -1 on error. */
static int
counted(PyObject *ing, PyObject *whole, PyObject *redo)
{
    return whole == NULL ? 1 : dropped_ingress(ing, whole, redo);
}

/* Adds (ing, e) to out for every egress e of node (node.egresses()); with ivs (a shared
 * entry's [(ingress, Verify_Port bit), ...]), (i, e) for each of its ingresses i instead.
 * 0, or -1 on error. */
static int
add_node_pairs(PyObject *out, PyObject *ing, PyObject *ivs, PyObject *node)
{
    Py_ssize_t n = ivs == NULL ? 1 : PyObject_Length(ivs);
    if (n < 0)
        return -1;
    PyObject *eg = node_egresses(node);
    if (eg == NULL)
        return -1;
    PyObject *it = PyObject_GetIter(eg), *e;
    Py_DECREF(eg);
    if (it == NULL)
        return -1;
    while ((e = PyIter_Next(it)) != NULL) {
        for (Py_ssize_t k = 0; k < n; k++) {
            PyObject *src = ing;
            if (ivs != NULL) {
                PyObject *iv = item(ivs, k);
                src = iv == NULL ? NULL : item(iv, 0);
            }
            PyObject *pair = src == NULL ? NULL : PyTuple_Pack(2, src, e);
            int bad = pair == NULL || PySet_Add(out, pair) < 0;
            Py_XDECREF(pair);
            if (bad) {
                Py_DECREF(e);
                Py_DECREF(it);
                return -1;
            }
        }
        Py_DECREF(e);
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *
pairs(PyObject *self, PyObject *args)
{
    PyObject *outcomes, *links, *entries, *whole, *redo;
    if (!PyArg_ParseTuple(args, "O!O!O!OO", &PyList_Type, &outcomes, &PyList_Type, &links,
                          &PyList_Type, &entries, &whole, &redo))
        return NULL;
    if (whole == Py_None)
        whole = NULL;
    else if (!PyAnySet_Check(whole) || !PyAnySet_Check(redo)) {
        PyErr_SetString(PyExc_TypeError, "whole and redo must be sets or frozensets");
        return NULL;
    }
    PyObject *out = PyFrozenSet_New(NULL); /* filled before anyone sees it */
    if (out == NULL)
        return NULL;
    /* Paths spelled out, (ingress, kind, port, hops, ...): the egress is the last hop's
     * switch and the port (Outcome.egress). */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(outcomes); i++) {
        PyObject *o = PyList_GET_ITEM(outcomes, i);
        PyObject *ing = item(o, 0), *kind = ing ? item(o, 1) : NULL;
        PyObject *port = kind ? item(o, 2) : NULL, *hops = port ? item(o, 3) : NULL;
        if (hops == NULL)
            goto fail;
        if (!PyUnicode_Check(kind) || PyUnicode_CompareWithASCIIString(kind, "egress") != 0)
            continue;
        int take = counted(ing, whole, redo);
        if (take < 0)
            goto fail;
        if (!take)
            continue;
        Py_ssize_t n = PyObject_Length(hops);
        PyObject *last = n < 0 ? NULL : item(hops, n - 1);
        PyObject *dpid = last == NULL ? NULL : item(last, 0);
        PyObject *egress = dpid == NULL ? NULL : PyTuple_Pack(2, dpid, port);
        PyObject *pair = egress == NULL ? NULL : PyTuple_Pack(2, ing, egress);
        Py_XDECREF(egress);
        int bad = pair == NULL || PySet_Add(out, pair) < 0;
        Py_XDECREF(pair);
        if (bad)
            goto fail;
    }
    /* Links (ingress, hops, Verify_Port, alternative, node): the node's egresses. */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(links); i++) {
        PyObject *x = PyList_GET_ITEM(links, i);
        PyObject *ing = item(x, 0), *node = ing ? item(x, 4) : NULL;
        if (node == NULL)
            goto fail;
        int take = counted(ing, whole, redo);
        if (take < 0 || (take && add_node_pairs(out, ing, NULL, node) < 0))
            goto fail;
    }
    /* Shared entries (node, [(ingress, Verify_Port bit), ...]): every ingress of the switch
     * goes or stays together, so the first one's switch decides. */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); i++) {
        PyObject *e = PyList_GET_ITEM(entries, i);
        PyObject *node = item(e, 0), *ings = node ? item(e, 1) : NULL;
        if (ings == NULL)
            goto fail;
        int take = 1;
        if (whole != NULL) {
            PyObject *sw = path(e, ENTRY_SWITCH, 4);
            if (sw == NULL)
                goto fail;
            take = PySet_Contains(whole, sw);
        }
        if (take < 0 || (take && add_node_pairs(out, NULL, ings, node) < 0))
            goto fail;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* by[id(ivs)] = (ivs, set of egresses) |= changed. 0, or -1 on error. */
static int
add_changed(PyObject *by, PyObject *ivs, PyObject *changed)
{
    PyObject *key = PyLong_FromVoidPtr(ivs);
    if (key == NULL)
        return -1;
    PyObject *got = PyDict_GetItemWithError(by, key);
    int bad = 0;
    if (got != NULL) {
        PyObject *acc = item(got, 1);
        PyObject *res = acc == NULL ? NULL : PyNumber_InPlaceOr(acc, changed);
        bad = res == NULL;
        Py_XDECREF(res);
    }
    else if (PyErr_Occurred()) {
        bad = 1;
    }
    else {
        PyObject *acc = PySet_New(changed);
        PyObject *val = acc == NULL ? NULL : PyTuple_Pack(2, ivs, acc);
        Py_XDECREF(acc);
        bad = val == NULL || PyDict_SetItem(by, key, val) < 0;
        Py_XDECREF(val);
    }
    Py_DECREF(key);
    return bad ? -1 : 0;
}

/* entry_changes(old, new, by, old_rest, new_rest): see cpc.index.pair_changes. Shared
 * entries (node, ingresses) of the two sides with the same ingress list object are matched;
 * where their nodes differ, the egresses one reaches and the other does not are added to
 * by[id(ingresses)] = (ingresses, egresses). The entries left unmatched are appended to
 * old_rest and new_rest. */
static PyObject *
entry_changes(PyObject *self, PyObject *args)
{
    PyObject *old, *new, *by, *old_rest, *new_rest;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!", &PyList_Type, &old, &PyList_Type, &new,
                          &PyDict_Type, &by, &PyList_Type, &old_rest, &PyList_Type, &new_rest))
        return NULL;
    /* An open-addressing table of the new side's ingress lists (borrowed pointers). */
    Py_ssize_t n = PyList_GET_SIZE(new), cap = 8;
    while (cap < 2 * n)
        cap *= 2;
    PyObject **keys = PyMem_Calloc(cap, sizeof(PyObject *));
    Py_ssize_t *at = PyMem_Malloc(cap * sizeof(Py_ssize_t));
    char *used = PyMem_Calloc(n ? n : 1, 1);
    if (keys == NULL || at == NULL || used == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ivs = item(PyList_GET_ITEM(new, i), 1);
        if (ivs == NULL)
            goto fail;
        size_t h = ((size_t)ivs >> 4) & (cap - 1);
        while (keys[h] != NULL && keys[h] != ivs)
            h = (h + 1) & (cap - 1);
        if (keys[h] == NULL) { /* the same list twice on a side: the first is matched */
            keys[h] = ivs;
            at[h] = i;
        }
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(old); i++) {
        PyObject *e = PyList_GET_ITEM(old, i);
        PyObject *node = item(e, 0), *ivs = node ? item(e, 1) : NULL;
        if (ivs == NULL)
            goto fail;
        size_t h = ((size_t)ivs >> 4) & (cap - 1);
        while (keys[h] != NULL && keys[h] != ivs)
            h = (h + 1) & (cap - 1);
        if (keys[h] == NULL || used[at[h]]) {
            if (PyList_Append(old_rest, e) < 0)
                goto fail;
            continue;
        }
        used[at[h]] = 1;
        PyObject *now = item(PyList_GET_ITEM(new, at[h]), 0);
        if (now == NULL)
            goto fail;
        if (now == node)
            continue;
        PyObject *a = node_egresses(node), *b = a ? node_egresses(now) : NULL;
        PyObject *changed = b ? PyNumber_Xor(a, b) : NULL;
        Py_XDECREF(a);
        Py_XDECREF(b);
        if (changed == NULL)
            goto fail;
        Py_ssize_t size = PyObject_Length(changed);
        int bad = size < 0 || (size > 0 && add_changed(by, ivs, changed) < 0);
        Py_DECREF(changed);
        if (bad)
            goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!used[i] && PyList_Append(new_rest, PyList_GET_ITEM(new, i)) < 0)
            goto fail;
    PyMem_Free(keys);
    PyMem_Free(at);
    PyMem_Free(used);
    Py_RETURN_NONE;
fail:
    PyMem_Free(keys);
    PyMem_Free(at);
    PyMem_Free(used);
    return NULL;
}

/* same_objects(a, b): whether lists a and b hold the same objects, each as often, in any
 * order (identity, not equality: no object's __eq__ or __hash__ is called). */
static PyObject *
same_objects(PyObject *self, PyObject *args)
{
    PyObject *a, *b;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &a, &PyList_Type, &b))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(a), cap = 8;
    if (n != PyList_GET_SIZE(b))
        Py_RETURN_FALSE;
    if (n == 0)
        Py_RETURN_TRUE;
    while (cap < 2 * n)
        cap *= 2;
    PyObject **keys = PyMem_Calloc(cap, sizeof(PyObject *));
    Py_ssize_t *count = PyMem_Calloc(cap, sizeof(Py_ssize_t));
    if (keys == NULL || count == NULL) {
        PyMem_Free(keys);
        PyMem_Free(count);
        return PyErr_NoMemory();
    }
    int same = 1;
    for (int side = 0; side < 2 && same; side++) {
        PyObject *list = side ? b : a;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *x = PyList_GET_ITEM(list, i);
            size_t h = ((size_t)x >> 4) & (cap - 1);
            while (keys[h] != NULL && keys[h] != x)
                h = (h + 1) & (cap - 1);
            if (side == 0) {
                keys[h] = x;
                count[h]++;
            }
            else if (keys[h] == NULL || count[h]-- == 0) {
                same = 0;
                break;
            }
        }
    }
    PyMem_Free(keys);
    PyMem_Free(count);
    return PyBool_FromLong(same);
}

/* trie = {element: {action there: next level}, leaf: node}: the first node (depth-first,
 * as the Python search it replaced did) whose every element has the action
 * owners.get(element), borrowed (Py_None when there is none; NULL on error). The tries and
 * owners are not changed during the call, so the stack holds borrowed levels. */
static PyObject *
find_node(PyObject *trie, PyObject *owners, PyObject *leaf)
{
    Py_ssize_t cap = 16, top = 0;
    PyObject **stack = PyMem_Malloc(cap * sizeof(PyObject *));
    if (stack == NULL)
        return PyErr_NoMemory();
    stack[top++] = trie;
    PyObject *found = Py_None;
    while (top > 0) {
        PyObject *level = stack[--top];
        if (!PyDict_Check(level)) {
            PyErr_SetString(PyExc_TypeError, "a trie level must be a dict");
            goto fail;
        }
        Py_ssize_t pos = 0;
        PyObject *elem, *by_action;
        while (PyDict_Next(level, &pos, &elem, &by_action)) {
            if (elem == leaf) {
                found = by_action;
                goto done;
            }
            PyObject *act = PyDict_GetItemWithError(owners, elem);
            if (act == NULL) {
                if (PyErr_Occurred())
                    goto fail;
                act = Py_None;
            }
            if (!PyDict_Check(by_action)) {
                PyErr_SetString(PyExc_TypeError, "a trie level must map actions to levels");
                goto fail;
            }
            PyObject *next = PyDict_GetItemWithError(by_action, act);
            if (next == NULL) {
                if (PyErr_Occurred())
                    goto fail;
                continue;
            }
            if (next == Py_None)
                continue;
            if (top == cap) {
                cap *= 2;
                PyObject **grown = PyMem_Realloc(stack, cap * sizeof(PyObject *));
                if (grown == NULL) {
                    PyErr_NoMemory();
                    goto fail;
                }
                stack = grown;
            }
            stack[top++] = next;
        }
    }
done:
    PyMem_Free(stack);
    return found;
fail:
    PyMem_Free(stack);
    return NULL;
}

static PyObject *
trie_find(PyObject *self, PyObject *args)
{
    PyObject *trie, *owners, *leaf;
    if (!PyArg_ParseTuple(args, "O!O!O", &PyDict_Type, &trie, &PyDict_Type, &owners, &leaf))
        return NULL;
    return Py_XNewRef(find_node(trie, owners, leaf));
}

/* trie[elems[0]][actions[0]][elems[1]][actions[1]]...[leaf] = node, each level made where
 * missing and a node already stored under the same path kept (Walker._suffix's store, as
 * cpc.walk._trie_add does it in Python). */
static PyObject *
trie_add(PyObject *self, PyObject *args)
{
    PyObject *trie, *elems, *actions, *node, *leaf;
    if (!PyArg_ParseTuple(args, "O!O!O!OO", &PyDict_Type, &trie, &PyTuple_Type, &elems,
                          &PyTuple_Type, &actions, &node, &leaf))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(elems);
    if (PyTuple_GET_SIZE(actions) != n) {
        PyErr_SetString(PyExc_ValueError, "trie_add: as many actions as elements");
        return NULL;
    }
    PyObject *level = trie;
    for (Py_ssize_t i = 0; i < 2 * n; i++) {
        PyObject *key = i % 2 ? PyTuple_GET_ITEM(actions, i / 2) : PyTuple_GET_ITEM(elems, i / 2);
        if (!PyDict_Check(level)) {
            PyErr_SetString(PyExc_TypeError, "a trie level must be a dict");
            return NULL;
        }
        PyObject *next = PyDict_GetItemWithError(level, key);
        if (next == NULL) {
            if (PyErr_Occurred())
                return NULL;
            next = PyDict_New();
            if (next == NULL)
                return NULL;
            int rc = PyDict_SetItem(level, key, next);
            Py_DECREF(next); /* the level holds it */
            if (rc < 0)
                return NULL;
        }
        level = next;
    }
    if (!PyDict_Check(level)) {
        PyErr_SetString(PyExc_TypeError, "a trie level must be a dict");
        return NULL;
    }
    if (PyDict_SetDefault(level, leaf, node) == NULL)
        return NULL;
    Py_RETURN_NONE;
}

/* frame.update(zip(elems, actions)) for a node's elements and their actions
 * (Walker._linked: the node being computed depends on what a linked node depends on). */
static PyObject *
merge_deps(PyObject *self, PyObject *args)
{
    PyObject *frame, *elems, *actions;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyDict_Type, &frame, &PyTuple_Type, &elems,
                          &PyTuple_Type, &actions))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(elems);
    if (PyTuple_GET_SIZE(actions) != n) {
        PyErr_SetString(PyExc_ValueError, "merge_deps: as many actions as elements");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyDict_SetItem(frame, PyTuple_GET_ITEM(elems, i), PyTuple_GET_ITEM(actions, i)) < 0)
            return NULL;
    Py_RETURN_NONE;
}

static PyObject *str_idx, *str_groups, *str_first_made, *str_first_ports; /* interned */
static PyObject *zero;

/* The class's action at switch dpid's table-0 wildcard element (elements[(dpid, 0, None)]),
 * borrowed: Py_None where there is none. NULL on error. */
static PyObject *
table0_action(PyObject *elements, PyObject *owners, PyObject *dpid)
{
    PyObject *key = PyTuple_Pack(3, dpid, zero, Py_None);
    if (key == NULL)
        return NULL;
    PyObject *el = PyDict_GetItemWithError(elements, key);
    Py_DECREF(key);
    if (el == NULL)
        return PyErr_Occurred() ? NULL : Py_None;
    PyObject *idx = PyObject_GetAttr(el, str_idx);
    if (idx == NULL)
        return NULL;
    PyObject *act = PyDict_GetItemWithError(owners, idx);
    Py_DECREF(idx);
    if (act == NULL)
        return PyErr_Occurred() ? NULL : Py_None;
    return act;
}

/* Whether no item of iterable a is in set b (1, 0, or -1 on error); with add, adds each
 * item of a to b instead (0, or -1 on error). */
static int
each_in(PyObject *a, PyObject *b, int add)
{
    PyObject *it = PyObject_GetIter(a), *x;
    if (it == NULL)
        return -1;
    int res = add ? 0 : 1;
    while (res > 0 || add) {
        x = PyIter_Next(it);
        if (x == NULL)
            break;
        int in = add ? PySet_Add(b, x) : PySet_Contains(b, x);
        Py_DECREF(x);
        if (in < 0)
            res = -1;
        else if (!add && in)
            res = 0;
        if (in < 0)
            break;
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : res;
}

/* The stored node that class walks enter switch dpid through (Walker._memo_entry), as the
 * shared entry of all the switch's edge ingresses (Walker._entry_of), or Py_None (borrowed)
 * where the Python walk must do it. A new reference, NULL on error; the node's groups are
 * added to *groups (made when first needed). */
static PyObject *
memo_entry(PyObject *dpid, PyObject *owners, PyObject *xmemo, PyObject *elements,
           PyObject *edge_groups, PyObject *port_dpids, PyObject *cache, PyObject *leaf,
           PyObject *entry_type, PyObject **groups)
{
    int special = PySet_Contains(port_dpids, dpid);
    if (special != 0)
        return special < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *group = PyDict_GetItemWithError(edge_groups, dpid); /* (ivs, ports) */
    if (group == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    PyObject *ivs = item(group, 0), *ports = ivs ? item(group, 1) : NULL;
    PyObject *act = ports ? table0_action(elements, owners, dpid) : NULL;
    if (act == NULL)
        return NULL;
    PyObject *key = PyTuple_Pack(3, dpid, Py_None, act);
    if (key == NULL)
        return NULL;
    PyObject *at = PyDict_GetItemWithError(xmemo, key);
    Py_DECREF(key);
    if (at == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    if (!PyDict_Check(at) || PyDict_GET_SIZE(at) == 0)
        return Py_NewRef(Py_None);
    PyObject *node = find_node(at, owners, leaf);
    if (node == NULL || node == Py_None)
        return Py_XNewRef(node);
    /* Every edge ingress shares the node unless its first hop outputs to one of them. */
    PyObject *first = made_or_call(node, str_first_made, str_first_ports);
    if (first == NULL)
        return NULL;
    int apart = PyAnySet_Check(ports) ? each_in(first, ports, 0) : -2;
    Py_DECREF(first);
    if (apart == -2)
        PyErr_SetString(PyExc_TypeError, "edge ports must be a set");
    if (apart < 0)
        return NULL;
    if (apart == 0)
        return Py_NewRef(Py_None);
    PyObject *ng = PyObject_GetAttr(node, str_groups);
    if (ng == NULL)
        return NULL;
    int bad = 0;
    if (PyObject_IsTrue(ng)) {
        if (*groups == NULL)
            *groups = PySet_New(NULL);
        bad = *groups == NULL || each_in(ng, *groups, 1) < 0;
    }
    Py_DECREF(ng);
    if (bad)
        return NULL;
    PyObject *entry = PyDict_GetItemWithError(cache, node);
    if (entry == NULL && PyErr_Occurred())
        return NULL;
    if (entry != NULL) {
        PyObject *had = item(entry, 1);
        if (had == NULL)
            return NULL;
        if (had == ivs)
            return Py_NewRef(entry);
    }
    entry = PyObject_CallFunctionObjArgs(entry_type, node, ivs, NULL);
    if (entry == NULL || PyDict_SetItem(cache, node, entry) < 0) {
        Py_XDECREF(entry);
        return NULL;
    }
    return entry;
}

static PyObject *
memo_entries(PyObject *self, PyObject *args)
{
    PyObject *switches, *owners, *xmemo, *elements, *edge_groups, *port_dpids, *cache, *leaf;
    PyObject *entry_type;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!OO!OO", &PyList_Type, &switches, &PyDict_Type,
                          &owners, &PyDict_Type, &xmemo, &PyDict_Type, &elements, &PyDict_Type,
                          &edge_groups, &port_dpids, &PyDict_Type, &cache, &leaf, &entry_type))
        return NULL;
    if (!PyAnySet_Check(port_dpids)) {
        PyErr_SetString(PyExc_TypeError, "port_dpids must be a set or a frozenset");
        return NULL;
    }
    PyObject *out = PyList_New(PyList_GET_SIZE(switches)), *groups = NULL;
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(switches); i++) {
        PyObject *entry = memo_entry(PyList_GET_ITEM(switches, i), owners, xmemo, elements,
                                     edge_groups, port_dpids, cache, leaf, entry_type, &groups);
        if (entry == NULL)
            goto fail;
        PyList_SET_ITEM(out, i, entry);
        if (entry == Py_None) { /* the Python walk does all of it */
            Py_DECREF(out);
            Py_XDECREF(groups);
            Py_RETURN_NONE;
        }
    }
    return Py_BuildValue("(NN)", out, groups == NULL ? Py_NewRef(Py_None) : groups);
fail:
    Py_DECREF(out);
    Py_XDECREF(groups);
    return NULL;
}

static PyMethodDef methods[] = {
    {"split_via", split_via, METH_VARARGS,
     "split_via(outcomes, links, entries, dpids, crosses) -> (whole, redo, kept outcomes, "
     "kept links, kept entries, entries dropped); a list as given when it keeps everything."},
    {"pairs", pairs, METH_VARARGS,
     "pairs(outcomes, links, entries, whole, redo) -> frozenset of (ingress, egress) of every path "
     "(whole None), or of those a re-walk dropped (see split_via)."},
    {"entry_changes", entry_changes, METH_VARARGS,
     "entry_changes(old, new, by, old_rest, new_rest) -> None; the egresses changed per ingress "
     "list shared by both sides' entries, into by (see cpc.index.pair_changes)."},
    {"same_objects", same_objects, METH_VARARGS,
     "same_objects(a, b) -> whether the lists hold the same objects, as often, in any order."},
    {"trie_find", trie_find, METH_VARARGS,
     "trie_find(trie, owners, leaf) -> the node stored for these owners' actions, or None."},
    {"trie_add", trie_add, METH_VARARGS,
     "trie_add(trie, elems, actions, node, leaf) -> None; node stored under its elements and "
     "their actions (a node already there is kept)."},
    {"merge_deps", merge_deps, METH_VARARGS,
     "merge_deps(frame, elems, actions) -> None; frame.update(zip(elems, actions))."},
    {"memo_entries", memo_entries, METH_VARARGS,
     "memo_entries(switches, owners, xmemo, elements, edge_groups, port_dpids, cache, leaf, "
     "entry_type) -> (one shared entry per switch, the groups their nodes use or None), or "
     "None when a switch needs the Python walk."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "cpc._walkc", "The class walk's hot loops (cpc.walk).", -1, methods,
};

PyMODINIT_FUNC
PyInit__walkc(void)
{
    str_egresses = PyUnicode_InternFromString("egresses");
    str_egresses_made = PyUnicode_InternFromString("_egresses");
    str_idx = PyUnicode_InternFromString("idx");
    str_groups = PyUnicode_InternFromString("groups");
    str_first_made = PyUnicode_InternFromString("_first");
    str_first_ports = PyUnicode_InternFromString("first_ports");
    zero = PyLong_FromLong(0);
    str_dpids = PyUnicode_InternFromString("dpids");
    str_dpids_made = PyUnicode_InternFromString("_dpids");
    if (zero == NULL || str_dpids == NULL || str_dpids_made == NULL || str_egresses == NULL ||
        str_egresses_made == NULL || str_idx == NULL || str_groups == NULL ||
        str_first_made == NULL || str_first_ports == NULL)
        return NULL;
    return PyModule_Create(&module);
}
