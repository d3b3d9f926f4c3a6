/* An open-addressing table of (URL id, text hash) pairs for trawl.frontier.known_ids.
 *
 * The same table as known_ids._Generation (the reference, used when trawl is built
 * without compiling), in C: a probe reads two 64-bit numbers side by side in one flat
 * array, with no Python int made per slot read. A text hash of 0 marks a free slot, so
 * stored hashes have their lowest bit set.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define MAX_LOAD 0.7

typedef struct {
    PyObject_HEAD
    int64_t *pairs;   /* 2 * slots numbers: an id, then its marked text hash */
    Py_ssize_t slots; /* a power of two */
    Py_ssize_t size;  /* pairs held */
    Py_ssize_t limit; /* pairs held before the table should grow */
} IdTable;

static int64_t
mark(int64_t text_hash)
{
    return (int64_t)((uint64_t)text_hash | 1u);
}

/* The index in pairs of (uid, marked), or of the free slot that ends its probe. */
static Py_ssize_t
locate(const IdTable *table, int64_t uid, int64_t marked)
{
    const uint64_t mask = (uint64_t)table->slots - 1;
    uint64_t slot = (uint64_t)uid & mask;
    for (;;) {
        const int64_t *pair = table->pairs + 2 * slot;
        if (pair[1] == 0 || (pair[1] == marked && pair[0] == uid)) {
            return (Py_ssize_t)(2 * slot);
        }
        slot = (slot + 1) & mask;
    }
}

static void
put(IdTable *table, int64_t uid, int64_t marked)
{
    Py_ssize_t at = locate(table, uid, marked);
    if (table->pairs[at + 1] == 0) {
        table->pairs[at] = uid;
        table->pairs[at + 1] = marked;
        table->size++;
    }
}

static IdTable *
make(PyTypeObject *type, Py_ssize_t slots)
{
    if (slots < 1 || (slots & (slots - 1)) != 0) {
        PyErr_SetString(PyExc_ValueError, "slots must be a power of two");
        return NULL;
    }
    if ((size_t)slots > PY_SSIZE_T_MAX / (2 * sizeof(int64_t))) {
        PyErr_NoMemory();
        return NULL;
    }
    IdTable *table = (IdTable *)type->tp_alloc(type, 0);
    if (table == NULL) {
        return NULL;
    }
    table->pairs = PyMem_Calloc((size_t)slots * 2, sizeof(int64_t));
    if (table->pairs == NULL) {
        Py_DECREF(table);
        return (IdTable *)PyErr_NoMemory();
    }
    table->slots = slots;
    table->size = 0;
    table->limit = (Py_ssize_t)((double)slots * MAX_LOAD);
    return table;
}

static PyObject *
IdTable_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"slots", NULL};
    Py_ssize_t slots;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "n", keywords, &slots)) {
        return NULL;
    }
    return (PyObject *)make(type, slots);
}

static void
IdTable_dealloc(IdTable *table)
{
    PyMem_Free(table->pairs);
    Py_TYPE(table)->tp_free((PyObject *)table);
}

/* The two signed 64-bit arguments (uid, text hash); false with an error set if not. */
static int
two_ids(PyObject *const *args, Py_ssize_t nargs, int64_t *uid, int64_t *text_hash)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "expected (uid, text_hash)");
        return 0;
    }
    long long first = PyLong_AsLongLong(args[0]);
    if (first == -1 && PyErr_Occurred()) {
        return 0;
    }
    long long second = PyLong_AsLongLong(args[1]);
    if (second == -1 && PyErr_Occurred()) {
        return 0;
    }
    *uid = (int64_t)first;
    *text_hash = (int64_t)second;
    return 1;
}

static PyObject *
IdTable_find(IdTable *table, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t uid, text_hash;
    if (!two_ids(args, nargs, &uid, &text_hash)) {
        return NULL;
    }
    Py_ssize_t at = locate(table, uid, mark(text_hash));
    return PyBool_FromLong(table->pairs[at + 1] != 0);
}

static PyObject *
IdTable_add(IdTable *table, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t uid, text_hash;
    if (!two_ids(args, nargs, &uid, &text_hash)) {
        return NULL;
    }
    if (table->size >= table->slots - 1) {
        PyErr_SetString(PyExc_OverflowError, "the table is full");
        return NULL;
    }
    put(table, uid, mark(text_hash));
    Py_RETURN_NONE;
}

static PyObject *
IdTable_grown(IdTable *table, PyObject *Py_UNUSED(ignored))
{
    if (table->slots > PY_SSIZE_T_MAX / 2) {
        return PyErr_NoMemory();
    }
    IdTable *bigger = make(Py_TYPE(table), table->slots * 2);
    if (bigger == NULL) {
        return NULL;
    }
    for (Py_ssize_t at = 0; at < 2 * table->slots; at += 2) {
        if (table->pairs[at + 1] != 0) {
            put(bigger, table->pairs[at], table->pairs[at + 1]);
        }
    }
    return (PyObject *)bigger;
}

static PyObject *
IdTable_get_size(IdTable *table, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(table->size);
}

static PyObject *
IdTable_get_limit(IdTable *table, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(table->limit);
}

static PyObject *
IdTable_get_nbytes(IdTable *table, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(table->slots * 2 * (Py_ssize_t)sizeof(int64_t));
}

static PyMethodDef IdTable_methods[] = {
    {"find", (PyCFunction)(void (*)(void))IdTable_find, METH_FASTCALL,
     "find(uid, text_hash) -> bool: whether the pair is in the table."},
    {"add", (PyCFunction)(void (*)(void))IdTable_add, METH_FASTCALL,
     "add(uid, text_hash): put the pair in the table (once)."},
    {"grown", (PyCFunction)IdTable_grown, METH_NOARGS,
     "grown() -> IdTable: the same pairs in a table of twice the slots."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef IdTable_getset[] = {
    {"size", (getter)IdTable_get_size, NULL, "Pairs held.", NULL},
    {"limit", (getter)IdTable_get_limit, NULL, "Pairs held before it should grow.", NULL},
    {"nbytes", (getter)IdTable_get_nbytes, NULL, "Bytes of its array.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject IdTableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "trawl.frontier._idtable.IdTable",
    .tp_doc = "IdTable(slots): (URL id, text hash) pairs in `slots` slots, a power of two.",
    .tp_basicsize = sizeof(IdTable),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = IdTable_new,
    .tp_dealloc = (destructor)IdTable_dealloc,
    .tp_methods = IdTable_methods,
    .tp_getset = IdTable_getset,
};

/* Whether the table holds (uid, marked). */
static int
holds(const IdTable *table, int64_t uid, int64_t marked)
{
    return table->pairs[locate(table, uid, marked) + 1] != 0;
}

/* Appends a new reference to `item` to `list`, consuming it; false on an error. */
static int
append_new(PyObject *list, PyObject *item)
{
    if (item == NULL) {
        return 0;
    }
    int failed = PyList_Append(list, item);
    Py_DECREF(item);
    return failed == 0;
}

/* The loop of KnownIds.screen (trawl.frontier.known_ids._screen is its reference). */
static PyObject *
screen(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyDict_Check(args[1]) || !PyObject_TypeCheck(args[2], &IdTableType) ||
        !PyObject_TypeCheck(args[3], &IdTableType)) {
        PyErr_SetString(PyExc_TypeError, "expected (candidates, dict, IdTable, IdTable)");
        return NULL;
    }
    PyObject *recent = args[1];
    const IdTable *newer = (const IdTable *)args[2];
    const IdTable *older = (const IdTable *)args[3];
    PyObject *seq = PySequence_Fast(args[0], "candidates must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    PyObject *unique = PyDict_New();
    PyObject *found_ids = PyList_New(0);
    PyObject *found_hashes = PyList_New(0);
    Py_ssize_t duplicates = 0;
    if (unique == NULL || found_ids == NULL || found_hashes == NULL) {
        goto error;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *candidate = items[i];
        if (!PyTuple_Check(candidate) || PyTuple_GET_SIZE(candidate) < 2) {
            PyErr_SetString(PyExc_TypeError, "a candidate must be a (id, url, ...) tuple");
            goto error;
        }
        PyObject *id_object = PyTuple_GET_ITEM(candidate, 0);
        int earlier = PyDict_Contains(unique, id_object);
        if (earlier < 0) {
            goto error;
        }
        if (earlier) {
            duplicates++;
            continue;
        }
        Py_hash_t text_hash = PyObject_Hash(PyTuple_GET_ITEM(candidate, 1));
        if (text_hash == -1 && PyErr_Occurred()) {
            goto error;
        }
        PyObject *stored = PyDict_GetItemWithError(recent, id_object);
        if (stored != NULL) {
            long long value = PyLong_AsLongLong(stored);
            if (value == -1 && PyErr_Occurred()) {
                goto error;
            }
            if (value == (long long)text_hash) {
                duplicates++;
                continue;
            }
        } else if (PyErr_Occurred()) {
            goto error;
        }
        long long uid = PyLong_AsLongLong(id_object);
        if (uid == -1 && PyErr_Occurred()) {
            goto error;
        }
        int64_t marked = mark((int64_t)text_hash);
        if (holds(newer, (int64_t)uid, marked) || holds(older, (int64_t)uid, marked)) {
            duplicates++;
            Py_INCREF(id_object);
            if (!append_new(found_ids, id_object) ||
                !append_new(found_hashes, PyLong_FromSsize_t(text_hash))) {
                goto error;
            }
            continue;
        }
        if (PyDict_SetItem(unique, id_object, candidate) < 0) {
            goto error;
        }
    }
    Py_DECREF(seq);
    return Py_BuildValue("(NnNN)", unique, duplicates, found_ids, found_hashes);
error:
    Py_DECREF(seq);
    Py_XDECREF(unique);
    Py_XDECREF(found_ids);
    Py_XDECREF(found_hashes);
    return NULL;
}

static PyMethodDef idtable_functions[] = {
    {"screen", (PyCFunction)(void (*)(void))screen, METH_FASTCALL,
     "screen(candidates, recent, newer, older) -> (unique, duplicates, found_ids, "
     "found_hashes): the candidates known to none of the cache's parts, the first of each "
     "id, by id; how many others there were; the (id, text hash) pairs the tables held."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef idtable_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "trawl.frontier._idtable",
    .m_doc = "An open-addressing table of (URL id, text hash) pairs (trawl.frontier.known_ids).",
    .m_size = -1,
    .m_methods = idtable_functions,
};

PyMODINIT_FUNC
PyInit__idtable(void)
{
    if (PyType_Ready(&IdTableType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&idtable_module);
    if (module == NULL) {
        return NULL;
    }
    Py_INCREF(&IdTableType);
    if (PyModule_AddObject(module, "IdTable", (PyObject *)&IdTableType) < 0) {
        Py_DECREF(&IdTableType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
