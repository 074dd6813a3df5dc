/* ONNX import/export: PyTorch parity, shape folding, round trips (bit-identical, and accepted
 * by onnx.checker when python3-onnx is installed), and the errors for broken or unsupported
 * files. Small models are built here directly as protobuf messages. */
#include <unistd.h>

#include "testutil.h"
#include "flare/data.h"
#include "flare/onnx.h"
#include "flare/train.h"
#include "onnx/onnx_int.h"

#define PARITY "tests/fixtures/parity/"

static char tmpdir[64];

static int setup(void **state) {
    strcpy(tmpdir, "/tmp/flare_onnx_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *tmp(const char *name) {
    static char buf[4][256];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 256, "%s/%s", tmpdir, name);
    return p;
}

static int have_onnx_checker(void) {
    static int have = -1;
    if (have < 0) have = system("/usr/bin/python3 -c 'import onnx' >/dev/null 2>&1") == 0;
    return have;
}

/* onnx.checker.check_model on a saved file, when python3 with onnx is there (when it is not,
 * test_onnx_checker_available is reported as skipped, or fails under CI=true). */
static void onnx_check(const char *path) {
    if (!have_onnx_checker()) {
        print_message("python3-onnx not installed: onnx.checker not run on %s\n", path);
        return;
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import onnx,sys; onnx.checker.check_model(onnx.load(sys.argv[1]))' '%s'",
             path);
    assert_int_equal(system(cmd), 0);
}

static fl_model *load_ok(const char *path) {
    fl_err e = {0};
    fl_model *m = NULL;
    if (fl_onnx_load(path, &m, &e) != FL_OK) fail_msg("load %s: %s", path, e.msg);
    return m;
}

static int count_op(const fl_model *m, const char *op) {
    int n = 0;
    for (int i = 0; i < m->n_nodes; i++) n += strcmp(m->nodes[i].op->name, op) == 0;
    return n;
}

static void forward_ok(fl_model *m, const fl_tensor *x) {
    fl_err e = {0};
    if (fl_model_forward(m, x, &e) != FL_OK) fail_msg("forward: %s", e.msg);
}

/* ---- PyTorch parity --------------------------------------------------------------------------- */
static void check_parity(const char *model) {
    fl_err e = {0};
    fl_tensor x = {0}, want = {0};
    assert_int_equal(fl_npy_read_tensor(PARITY "inputs.npy", &x, &e), FL_OK);
    assert_int_equal(fl_npy_read_tensor(PARITY "logits.npy", &want, &e), FL_OK);
    fl_model *m = load_ok(model);

    /* the Shape -> Gather -> Unsqueeze -> Concat chain is folded into [0, -1] */
    assert_int_equal(count_op(m, "Shape") + count_op(m, "Gather") + count_op(m, "Unsqueeze") +
                         count_op(m, "Concat"), 0);
    assert_int_equal(count_op(m, "Reshape"), 1);
    assert_int_equal(m->n_nodes, 13);
    int v = fl_model_find(m, "/Concat_output_0");
    assert_true(v >= 0);
    assert_int_equal(m->values[v].kind, FL_VAL_CONST);
    assert_int_equal(m->values[v].onnx_dtype, FL_ONNX_INT64);
    assert_int_equal(m->values[v].t.size, 2);
    assert_float_equal(m->values[v].t.data[0], 0, 0);
    assert_float_equal(m->values[v].t.data[1], -1, 0);
    assert_int_equal(fl_model_find(m, "/Shape_output_0"), -1);

    /* weights are parameters, BatchNorm statistics constants */
    assert_int_equal(m->values[fl_model_find(m, "conv1.weight")].kind, FL_VAL_PARAM);
    assert_int_equal(m->values[fl_model_find(m, "bn1.weight")].kind, FL_VAL_PARAM);
    assert_int_equal(m->values[fl_model_find(m, "bn1.bias")].kind, FL_VAL_PARAM);
    assert_int_equal(m->values[fl_model_find(m, "bn1.running_mean")].kind, FL_VAL_CONST);
    assert_int_equal(m->values[fl_model_find(m, "bn2.running_var")].kind, FL_VAL_CONST);
    assert_int_equal(m->values[fl_model_find(m, "fc2.bias")].kind, FL_VAL_PARAM);
    assert_int_equal(m->n_inputs, 1);
    assert_string_equal(fl_model_input_name(m, 0), "input");
    assert_int_equal(m->values[m->inputs[0]].decl_shape[0], 0); /* batch is free */

    forward_ok(m, &x);
    const fl_tensor *y = fl_model_output(m, 0);
    assert_true(fl_tensor_same_shape(y, &want));
    double worst = 0;
    for (int64_t i = 0; i < y->size; i++) worst = fmax(worst, fabs(y->data[i] - want.data[i]));
    print_message("%s: max |flare - torch| = %.3g\n", model, worst);
    assert_true(worst <= 1e-4);

    /* intermediate layers by their ONNX names */
    const fl_tensor *h = fl_model_tensor(m, "/conv1/Conv_output_0");
    assert_non_null(h);
    assert_int_equal(h->ndim, 4);
    assert_int_equal(h->shape[0], 8);
    assert_int_equal(h->shape[1], 8);
    assert_int_equal(h->shape[2], 28);
    h = fl_model_tensor(m, "/Reshape_output_0");
    assert_non_null(h);
    assert_int_equal(h->shape[1], 392);

    /* the folded shape works for any batch: the first 3 examples give the first 3 rows */
    fl_tensor x3 = x;
    x3.shape[0] = 3;
    x3.size = x.size / 8 * 3;
    forward_ok(m, &x3);
    y = fl_model_output(m, 0);
    assert_int_equal(y->shape[0], 3);
    for (int64_t i = 0; i < y->size; i++) assert_float_equal(y->data[i], want.data[i], 1e-4);

    fl_model_free(m);
    fl_tensor_free(&x);
    fl_tensor_free(&want);
}

static void test_parity_opset13(void **state) { check_parity(PARITY "model.onnx"); }
static void test_parity_opset9(void **state) { check_parity(PARITY "model_opset9.onnx"); }

/* ---- round trips ---------------------------------------------------------------------------- */
/* Save m, check it with onnx.checker, reload: same values and bit-identical outputs on x. */
static void roundtrip(fl_model *m, const fl_tensor *x, const char *name) {
    fl_err e = {0};
    const char *path = tmp(name);
    forward_ok(m, x);
    fl_tensor y1 = {0};
    assert_int_equal(fl_tensor_copy(&y1, fl_model_output(m, 0)), FL_OK);
    if (fl_onnx_save(m, path, &e) != FL_OK) fail_msg("save: %s", e.msg);
    onnx_check(path);
    fl_model *r = load_ok(path);
    assert_int_equal(r->n_nodes, m->n_nodes);
    assert_int_equal(r->opset, m->opset);
    assert_string_equal(r->producer_name, "flare");
    for (int i = 0; i < m->n_nodes; i++) {
        assert_string_equal(r->nodes[i].name, m->nodes[i].name);
        assert_string_equal(r->nodes[i].op->name, m->nodes[i].op->name);
        assert_int_equal(r->nodes[i].n_attr, m->nodes[i].n_attr);
    }
    for (int v = 0; v < m->n_values; v++) {
        const fl_value *a = &m->values[v];
        if (a->kind != FL_VAL_PARAM && a->kind != FL_VAL_CONST) continue;
        int w = fl_model_find(r, a->name);
        assert_true(w >= 0);
        assert_int_equal(r->values[w].onnx_dtype, a->onnx_dtype);
        assert_true(fl_tensor_same_shape(&r->values[w].t, &a->t));
        assert_memory_equal(r->values[w].t.data, a->t.data, (size_t)a->t.size * sizeof(float));
    }
    forward_ok(r, x);
    const fl_tensor *y2 = fl_model_output(r, 0);
    assert_true(fl_tensor_same_shape(&y1, y2));
    assert_memory_equal(y1.data, y2->data, (size_t)y1.size * sizeof(float));
    fl_tensor_free(&y1);
    fl_model_free(r);
}

/* The round trips below run onnx.checker on what they save; without python3-onnx they skip
 * that check, and this case says so. */
static void test_onnx_checker_available(void **state) {
    TU_NEED(have_onnx_checker(), "python3-onnx (onnx.checker on the models flare saves)");
}

static void test_roundtrip_parity(void **state) {
    fl_err e = {0};
    fl_tensor x = {0};
    assert_int_equal(fl_npy_read_tensor(PARITY "inputs.npy", &x, &e), FL_OK);
    fl_model *m = load_ok(PARITY "model.onnx");
    roundtrip(m, &x, "parity.onnx");
    fl_model_free(m);
    m = load_ok(PARITY "model_opset9.onnx");
    roundtrip(m, &x, "parity9.onnx");
    fl_model_free(m);
    fl_tensor_free(&x);
}

/* Every model of the zoo, saved before it was ever run (save plans it for the output shapes). */
static void test_roundtrip_zoo(void **state) {
    fl_err e = {0};
    fl_rng r;
    fl_rng_seed(&r, 7);
    for (const char *const *arch = fl_zoo_names(); *arch; arch++) {
        int hw = strcmp(*arch, "convnet") == 0 ? 32 : 28, c = hw == 32 ? 3 : 1;
        fl_model *m;
        if (fl_zoo_build(*arch, c, hw, hw, 10, 1, &m, &e) != FL_OK) fail_msg("zoo %s: %s", *arch, e.msg);
        char name[64];
        snprintf(name, sizeof name, "zoo_%s_unrun.onnx", *arch);
        uint8_t *buf;
        size_t len;
        assert_int_equal(fl_onnx_save_buffer(m, &buf, &len, &e), FL_OK);
        assert_true(len > 100);
        free(buf);
        int64_t shape[4] = {2, c, hw, hw};
        fl_tensor x = tu_tensor(4, shape, &r, 0, 1);
        snprintf(name, sizeof name, "zoo_%s.onnx", *arch);
        roundtrip(m, &x, name);
        fl_tensor_free(&x);
        fl_model_free(m);
    }
}

/* metadata_props survive export and import; set replaces a key's value */
static void test_metadata(void **state) {
    (void)state;
    fl_err e = {0};
    fl_model *m, *back;
    assert_int_equal(fl_zoo_build("lenet1", 1, 28, 28, 10, 1, &m, &e), FL_OK);
    assert_int_equal(fl_model_meta_set(m, "flare.gan.nz", "62", &e), FL_OK);
    assert_int_equal(fl_model_meta_set(m, "flare.gan.classes", "a,b", &e), FL_OK);
    assert_int_equal(fl_model_meta_set(m, "flare.gan.nz", "64", &e), FL_OK);
    assert_int_equal(m->n_meta, 2);
    uint8_t *buf;
    size_t len;
    assert_int_equal(fl_onnx_save_buffer(m, &buf, &len, &e), FL_OK);
    assert_int_equal(fl_onnx_load_buffer(buf, len, "meta.onnx", &back, &e), FL_OK);
    assert_string_equal(fl_model_meta_get(back, "flare.gan.nz"), "64");
    assert_string_equal(fl_model_meta_get(back, "flare.gan.classes"), "a,b");
    assert_null(fl_model_meta_get(back, "absent"));
    free(buf);
    fl_model_free(back);
    fl_model_free(m);
}

/* ---- broken files ------------------------------------------------------------------------------ */
static uint8_t *read_all(const char *path, size_t *len) {
    fl_err e = {0};
    uint8_t *buf;
    assert_int_equal(fl_file_read(path, &buf, len, &e), FL_OK);
    return buf;
}

static void test_truncated(void **state) {
    fl_err e = {0};
    size_t len;
    uint8_t *buf = read_all(PARITY "model.onnx", &len);
    size_t cuts[] = {0, 1, 2, 10, 64, 1000, len / 3, len / 2, len - 200, len - 30, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        fl_model *m = (fl_model *)1;
        fl_status st = fl_onnx_load_buffer(buf, cuts[i], "cut.onnx", &m, &e);
        if (st != FL_ERR_FORMAT) fail_msg("cut at %zu: status %d (%s)", cuts[i], st, e.msg);
        assert_null(m);
        assert_non_null(strstr(e.msg, "cut.onnx"));
    }
    /* through a real file: the message names its path */
    const char *path = tmp("truncated.onnx");
    assert_int_equal(fl_file_write_atomic(path, buf, len / 2, &e), FL_OK);
    fl_model *m;
    assert_int_equal(fl_onnx_load(path, &m, &e), FL_ERR_FORMAT);
    assert_non_null(strstr(e.msg, path));
    assert_int_equal(fl_onnx_load(tmp("missing.onnx"), &m, &e), FL_ERR_IO);
    free(buf);
}

static void test_corrupted(void **state) {
    fl_err e = {0};
    size_t len;
    uint8_t *buf = read_all(PARITY "model.onnx", &len);
    uint8_t *bad = malloc(len);
    memcpy(bad, buf, len);
    memset(bad, 0xff, 16); /* garbage where the first fields are */
    fl_model *m;
    assert_int_equal(fl_onnx_load_buffer(bad, len, "garbage.onnx", &m, &e), FL_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "garbage.onnx"));
    /* random byte corruptions: any status, never a crash (ASan run) or a leak */
    fl_rng r;
    fl_rng_seed(&r, 99);
    int ok = 0, failed = 0;
    for (int it = 0; it < 60; it++) {
        memcpy(bad, buf, len);
        for (int k = 0; k < 4; k++) bad[fl_rng_below(&r, (uint32_t)len)] = (uint8_t)fl_rng_u64(&r);
        fl_status st = fl_onnx_load_buffer(bad, len, "flipped.onnx", &m, &e);
        if (st == FL_OK) {
            ok++;
            fl_model_free(m);
        } else {
            failed++;
            assert_non_null(strstr(e.msg, "flipped.onnx"));
        }
    }
    assert_int_equal(ok + failed, 60);
    free(bad);
    free(buf);
}

/* ---- models built here ----------------------------------------------------------------------- */
typedef struct builder {
    fl_arena a;
    Onnx__ModelProto mp;
    Onnx__GraphProto g;
    Onnx__OperatorSetIdProto os, *osp[1];
    Onnx__NodeProto *nodes[16];
    Onnx__TensorProto *inits[16];
    Onnx__ValueInfoProto *ins[4], *outs[4];
} builder;

static void b_init(builder *b, int opset) {
    memset(b, 0, sizeof *b);
    onnx__model_proto__init(&b->mp);
    onnx__graph_proto__init(&b->g);
    onnx__operator_set_id_proto__init(&b->os);
    b->mp.has_ir_version = 1;
    b->mp.ir_version = 8;
    b->os.domain = "";
    b->os.has_version = 1;
    b->os.version = opset;
    b->osp[0] = &b->os;
    b->mp.n_opset_import = 1;
    b->mp.opset_import = b->osp;
    b->mp.graph = &b->g;
    b->g.name = "test";
    b->g.node = b->nodes;
    b->g.initializer = b->inits;
    b->g.input = b->ins;
    b->g.output = b->outs;
}

/* names: comma-separated list ("" entries allowed) */
static void split(builder *b, const char *names, size_t *n, char ***out) {
    *n = 0;
    *out = fl_arena_alloc(&b->a, sizeof(char *) * 8);
    if (!*names) return;
    char *s = fl_arena_strdup(&b->a, names);
    for (char *p = s;; (*n)++) {
        (*out)[*n] = p;
        char *c = strchr(p, ',');
        if (!c) {
            (*n)++;
            break;
        }
        *c = 0;
        p = c + 1;
    }
}

static Onnx__NodeProto *b_node(builder *b, const char *op, const char *name, const char *ins,
                               const char *outs) {
    Onnx__NodeProto *n = fl_arena_alloc(&b->a, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = fl_arena_strdup(&b->a, op);
    n->name = fl_arena_strdup(&b->a, name);
    split(b, ins, &n->n_input, &n->input);
    split(b, outs, &n->n_output, &n->output);
    n->attribute = fl_arena_alloc(&b->a, sizeof(void *) * 4);
    b->nodes[b->g.n_node++] = n;
    return n;
}

static Onnx__AttributeProto *b_attr(builder *b, Onnx__NodeProto *n, const char *name) {
    Onnx__AttributeProto *a = fl_arena_alloc(&b->a, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = fl_arena_strdup(&b->a, name);
    a->has_type = 1;
    n->attribute[n->n_attribute++] = a;
    return a;
}

static void b_attr_int(builder *b, Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = b_attr(b, n, name);
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1;
    a->i = v;
}

static Onnx__TensorProto *b_tensor(builder *b, const char *name, int dtype, int ndim,
                                   const int64_t *dims, const float *vals) {
    fl_tensor t = {0};
    assert_int_equal(fl_tensor_alloc(&t, ndim, dims), FL_OK);
    if (vals) memcpy(t.data, vals, (size_t)t.size * sizeof(float));
    Onnx__TensorProto *tp = fl_arena_alloc(&b->a, sizeof *tp);
    onnx__tensor_proto__init(tp);
    fl_onnx_tensor_encode(&b->a, tp, &t, dtype, name);
    fl_tensor_free(&t);
    return tp;
}

static Onnx__TensorProto *b_init_tensor(builder *b, const char *name, int dtype, int ndim,
                                        const int64_t *dims, const float *vals) {
    return b->inits[b->g.n_initializer++] = b_tensor(b, name, dtype, ndim, dims, vals);
}

/* A float tensor value; dims < 0: no shape; a 0 dim is the symbolic "N". */
static Onnx__ValueInfoProto *b_vi(builder *b, const char *name, int ndim, const int64_t *dims) {
    Onnx__ValueInfoProto *vi = fl_arena_alloc(&b->a, sizeof *vi);
    Onnx__TypeProto *tp = fl_arena_alloc(&b->a, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = fl_arena_alloc(&b->a, sizeof *tt);
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    vi->name = fl_arena_strdup(&b->a, name);
    vi->type = tp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = FL_ONNX_FLOAT;
    if (ndim < 0) return vi;
    tt->shape = fl_arena_alloc(&b->a, sizeof *tt->shape);
    onnx__tensor_shape_proto__init(tt->shape);
    tt->shape->n_dim = (size_t)ndim;
    tt->shape->dim = fl_arena_alloc(&b->a, sizeof(void *) * 8);
    for (int d = 0; d < ndim; d++) {
        Onnx__TensorShapeProto__Dimension *dp = fl_arena_alloc(&b->a, sizeof *dp);
        onnx__tensor_shape_proto__dimension__init(dp);
        if (dims[d] > 0) {
            dp->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dp->dim_value = dims[d];
        } else {
            dp->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dp->dim_param = "N";
        }
        tt->shape->dim[d] = dp;
    }
    return vi;
}

static void b_input(builder *b, const char *name, int ndim, const int64_t *dims) {
    b->ins[b->g.n_input++] = b_vi(b, name, ndim, dims);
}
static void b_output(builder *b, const char *name) { b->outs[b->g.n_output++] = b_vi(b, name, -1, NULL); }

static fl_status b_load(builder *b, fl_model **m, fl_err *e) {
    size_t len = onnx__model_proto__get_packed_size(&b->mp);
    uint8_t *buf = malloc(len);
    onnx__model_proto__pack(&b->mp, buf);
    fl_status st = fl_onnx_load_buffer(buf, len, "built.onnx", m, e);
    free(buf);
    fl_arena_free(&b->a);
    return st;
}

static const int64_t x_dims[2] = {0, 4};

/* x [N,4] -> Relu "r" -> y -> ... */
static void test_unsupported_op(void **state) {
    fl_err e = {0};
    fl_model *m;
    builder b;
    b_init(&b, 13);
    b_input(&b, "x", 2, x_dims);
    b_node(&b, "Relu", "r", "x", "y");
    b_node(&b, "Frobnicate", "mystery", "y", "z");
    b_output(&b, "z");
    assert_int_equal(b_load(&b, &m, &e), FL_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "built.onnx"));
    assert_non_null(strstr(e.msg, "mystery"));
    assert_non_null(strstr(e.msg, "Frobnicate"));

    /* an unnamed node is named "<op>_<index>" in messages too */
    b_init(&b, 13);
    b_input(&b, "x", 2, x_dims);
    b_node(&b, "Relu", "r", "x", "y");
    b_node(&b, "Frobnicate", "", "y", "z");
    b_output(&b, "z");
    assert_int_equal(b_load(&b, &m, &e), FL_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "'Frobnicate_1'"));

    /* an unsupported attribute of a supported op, named with its node */
    b_init(&b, 13);
    b_input(&b, "x", 2, x_dims);
    Onnx__NodeProto *n = b_node(&b, "Relu", "r", "x", "y");
    b_attr_int(&b, n, "bogus", 3);
    b_output(&b, "y");
    assert_int_equal(b_load(&b, &m, &e), FL_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "'r'"));
    assert_non_null(strstr(e.msg, "bogus"));

    /* a foreign operator domain */
    b_init(&b, 13);
    b_input(&b, "x", 2, x_dims);
    n = b_node(&b, "Relu", "r", "x", "y");
    n->domain = "com.microsoft";
    b_output(&b, "y");
    assert_int_equal(b_load(&b, &m, &e), FL_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "node 'r' (Relu): operator domain 'com.microsoft' is not supported"));
    /* with the version the model imports of it */
    b_init(&b, 13);
    Onnx__OperatorSetIdProto ms = ONNX__OPERATOR_SET_ID_PROTO__INIT, *osp2[2] = {&b.os, &ms};
    ms.domain = "com.microsoft", ms.has_version = 1, ms.version = 1;
    b.mp.opset_import = osp2, b.mp.n_opset_import = 2;
    b_input(&b, "x", 2, x_dims);
    n = b_node(&b, "FusedConv", "fc", "x", "y");
    n->domain = "com.microsoft";
    b_output(&b, "y");
    assert_int_equal(b_load(&b, &m, &e), FL_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "node 'fc' (FusedConv): operator domain 'com.microsoft' version 1 "
                                  "is not supported"));

    /* opsets outside 7..21 */
    for (int opset = 6; opset <= 22; opset += 16) {
        b_init(&b, opset);
        b_input(&b, "x", 2, x_dims);
        b_node(&b, "Relu", "r", "x", "y");
        b_output(&b, "y");
        assert_int_equal(b_load(&b, &m, &e), FL_ERR_UNSUPPORTED);
        /* one line naming file, node, op and version */
        assert_non_null(strstr(e.msg, opset == 6 ? "node 'r' (Relu): opset 6 " : "node 'r' (Relu): opset 22 "));
        assert_non_null(strstr(e.msg, "(7..21 are)"));
        assert_null(strchr(e.msg, '\n'));
    }
    /* opsets 7 and 21 load */
    for (int opset = 7; opset <= 21; opset += 14) {
        b_init(&b, opset);
        b_input(&b, "x", 2, x_dims);
        b_node(&b, "Relu", "r", "x", "y");
        b_output(&b, "y");
        assert_int_equal(b_load(&b, &m, &e), FL_OK);
        fl_model_free(m);
    }
    /* an op younger than the model's opset: one line naming file, node, op and versions */
    b_init(&b, 17);
    b_input(&b, "x", 2, x_dims);
    b_node(&b, "Gelu", "g", "x", "y");
    b_output(&b, "y");
    assert_int_equal(b_load(&b, &m, &e), FL_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "node 'g' (Gelu): Gelu is not in opset 17 of the default ONNX "
                                  "domain (it was added in opset 20)"));
    assert_null(strchr(e.msg, '\n'));
    b_init(&b, 20);
    b_input(&b, "x", 2, x_dims);
    b_node(&b, "Gelu", "g", "x", "y");
    b_output(&b, "y");
    assert_int_equal(b_load(&b, &m, &e), FL_OK);
    fl_model_free(m);
    /* a version whose semantics flare does not handle: named with the version in force */
    b_init(&b, 19);
    b_input(&b, "x", 4, (const int64_t[]){1, 1, 2, 2});
    const int64_t d4[1] = {4};
    b_init_tensor(&b, "scales", FL_ONNX_FLOAT, 1, d4, (const float[]){1, 1, 2, 2});
    n = b_node(&b, "Resize", "rs", "x,,scales", "y");
    b_attr_int(&b, n, "antialias", 1);
    b_output(&b, "y");
    assert_int_equal(b_load(&b, &m, &e), FL_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "node 'rs' (Resize): antialias is not supported"));
    assert_non_null(strstr(e.msg, "(Resize-19 at opset 19)"));
    assert_null(strchr(e.msg, '\n'));
}

/* Every op of the table has its versions listed (src/onnx/opversion.c): the version in force
 * is what the loader names, and an op missing there would pass for one of no opset. */
static void test_op_versions(void **state) {
    (void)state;
    for (const fl_op *const *p = fl_op_all(); *p; p++) {
        int first = fl_onnx_op_first_version((*p)->name);
        if (first < 1) fail_msg("op %s has no versions in src/onnx/opversion.c", (*p)->name);
        assert_int_equal(fl_onnx_op_version((*p)->name, first), first);
        assert_int_equal(fl_onnx_op_version((*p)->name, first - 1), 0);
        assert_true(fl_onnx_op_version((*p)->name, 21) >= first);
    }
    /* the changes of opsets 18..21 */
    assert_int_equal(fl_onnx_op_version("ReduceMean", 17), 13);
    assert_int_equal(fl_onnx_op_version("ReduceMean", 18), 18);
    assert_int_equal(fl_onnx_op_version("ReduceSum", 21), 13);
    assert_int_equal(fl_onnx_op_version("Pad", 20), 19);
    assert_int_equal(fl_onnx_op_version("Pad", 21), 21);
    assert_int_equal(fl_onnx_op_version("GroupNormalization", 20), 18);
    assert_int_equal(fl_onnx_op_version("GroupNormalization", 21), 21);
    assert_int_equal(fl_onnx_op_version("Gelu", 19), 0);
    assert_int_equal(fl_onnx_op_version("Frobnicate", 13), -1);
}

static void test_bad_graphs(void **state) {
    fl_err e = {0};
    fl_model *m;
    builder b;
    /* a node reading a name nobody defines */
    b_init(&b, 13);
    b_input(&b, "x", 2, x_dims);
    b_node(&b, "Add", "add", "x,ghost", "y");
    b_output(&b, "y");
    assert_int_equal(b_load(&b, &m, &e), FL_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "'add'"));
    assert_non_null(strstr(e.msg, "'ghost'"));

    /* a graph output nobody computes */
    b_init(&b, 13);
    b_input(&b, "x", 2, x_dims);
    b_node(&b, "Relu", "r", "x", "y");
    b_output(&b, "nothing");
    assert_int_equal(b_load(&b, &m, &e), FL_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "'nothing'"));

    /* initializers: unsupported type, external data, wrong length, negative dims */
    const int64_t d4[1] = {4};
    for (int k = 0; k < 4; k++) {
        b_init(&b, 13);
        b_input(&b, "x", 2, x_dims);
        Onnx__TensorProto *w = b_init_tensor(&b, "w", FL_ONNX_FLOAT, 1, d4, NULL);
        if (k == 0) w->data_type = 11; /* double */
        if (k == 1) {
            w->has_data_location = 1;
            w->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
        }
        if (k == 2) w->raw_data.len -= 4;
        if (k == 3) w->dims[0] = -4;
        b_node(&b, "Add", "add", "x,w", "y");
        b_output(&b, "y");
        assert_int_equal(b_load(&b, &m, &e), k < 2 ? FL_ERR_UNSUPPORTED : FL_ERR_FORMAT);
        assert_non_null(strstr(e.msg, "initializer 'w'"));
        if (k == 0) assert_non_null(strstr(e.msg, "double"));
        if (k == 1) assert_non_null(strstr(e.msg, "external data"));
    }
}

/* Old exporters list initializers among the graph inputs; Constant nodes become constants;
 * empty node names are generated; the result exports and reloads. */
static void test_inputs_constants_names(void **state) {
    fl_err e = {0};
    fl_model *m;
    builder b;
    const int64_t d4[1] = {4};
    const float w[4] = {1, 2, 3, 4};
    b_init(&b, 11);
    b_input(&b, "x", 2, x_dims);
    b_input(&b, "w", 1, d4);
    b_init_tensor(&b, "w", FL_ONNX_FLOAT, 1, d4, w);
    Onnx__NodeProto *c = b_node(&b, "Constant", "", "", "half");
    Onnx__AttributeProto *a = b_attr(&b, c, "value");
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    a->t = b_tensor(&b, NULL, FL_ONNX_FLOAT, 0, NULL, (const float[]){0.5f});
    b_node(&b, "Mul", "", "x,w", "xw");
    b_node(&b, "Mul", "", "xw,half", "y");
    b_output(&b, "y");
    if (b_load(&b, &m, &e) != FL_OK) fail_msg("%s", e.msg);
    assert_int_equal(m->n_inputs, 1);
    assert_int_equal(m->opset, 11);
    assert_int_equal(m->n_nodes, 2);
    assert_string_equal(m->nodes[0].name, "Mul_1");
    assert_string_equal(m->nodes[1].name, "Mul_2");
    assert_int_equal(m->values[fl_model_find(m, "w")].kind, FL_VAL_PARAM);
    assert_int_equal(m->values[fl_model_find(m, "half")].kind, FL_VAL_CONST);
    int64_t shape[2] = {2, 4};
    fl_tensor x = tu_tensor(2, shape, NULL, 0, 0);
    for (int i = 0; i < 8; i++) x.data[i] = (float)i;
    forward_ok(m, &x);
    for (int i = 0; i < 8; i++) assert_float_equal(fl_model_output(m, 0)->data[i], i * w[i % 4] * 0.5f, 0);
    roundtrip(m, &x, "consts.onnx");
    fl_tensor_free(&x);
    fl_model_free(m);
}

/* x [N,4] -> Shape -> Gather(0) -> Unsqueeze -> Concat with [-1] (order per `batch_first`)
 * -> Reshape(x). [N,-1] folds to [0,-1]; [-1,N] depends on the batch elsewhere: it stays
 * computed. */
static fl_status shape_chain(int batch_first, int x_batch, fl_model **m, fl_err *e) {
    builder b;
    const int64_t one[1] = {1}, xd[2] = {x_batch, 4};
    b_init(&b, 13);
    b_input(&b, "x", 2, xd);
    b_init_tensor(&b, "zero", FL_ONNX_INT64, 0, NULL, (const float[]){0});
    b_init_tensor(&b, "axes", FL_ONNX_INT64, 1, one, (const float[]){0});
    b_init_tensor(&b, "minus1", FL_ONNX_INT64, 1, one, (const float[]){-1});
    b_node(&b, "Shape", "shape", "x", "s");
    Onnx__NodeProto *g = b_node(&b, "Gather", "gather", "s,zero", "n");
    b_attr_int(&b, g, "axis", 0);
    b_node(&b, "Unsqueeze", "unsq", "n,axes", "n1");
    Onnx__NodeProto *c = b_node(&b, "Concat", "concat", batch_first ? "n1,minus1" : "minus1,n1", "shp");
    b_attr_int(&b, c, "axis", 0);
    b_node(&b, "Reshape", "reshape", "x,shp", "y");
    b_output(&b, "y");
    return b_load(&b, m, e);
}

static void test_fold(void **state) {
    fl_err e = {0};
    fl_model *m;
    if (shape_chain(1, 0, &m, &e) != FL_OK) fail_msg("%s", e.msg);
    assert_int_equal(m->n_nodes, 1);
    assert_string_equal(m->nodes[0].op->name, "Reshape");
    int v = fl_model_find(m, "shp");
    assert_int_equal(m->values[v].kind, FL_VAL_CONST);
    assert_int_equal(m->values[v].onnx_dtype, FL_ONNX_INT64);
    assert_float_equal(m->values[v].t.data[0], 0, 0);
    assert_float_equal(m->values[v].t.data[1], -1, 0);
    assert_int_equal(fl_model_find(m, "zero"), -1); /* constants only the chain read are gone */
    assert_int_equal(fl_model_find(m, "s"), -1);
    int64_t shape[2] = {7, 4};
    fl_tensor x = tu_tensor(2, shape, NULL, 0, 0);
    forward_ok(m, &x);
    assert_int_equal(fl_model_output(m, 0)->shape[0], 7);
    assert_int_equal(fl_model_output(m, 0)->shape[1], 4);
    roundtrip(m, &x, "folded.onnx");
    fl_tensor_free(&x);
    fl_model_free(m);

    /* the batch in second position cannot be a constant: the chain stays and runs per batch */
    if (shape_chain(0, 0, &m, &e) != FL_OK) fail_msg("%s", e.msg);
    assert_int_equal(count_op(m, "Shape"), 1);
    for (int64_t batch = 2; batch <= 3; batch++) {
        int64_t sh[2] = {batch, 4};
        x = tu_tensor(2, sh, NULL, 0, 0);
        forward_ok(m, &x);
        assert_int_equal(fl_model_output(m, 0)->shape[0], 4);
        assert_int_equal(fl_model_output(m, 0)->shape[1], batch);
        fl_tensor_free(&x);
    }
    fl_model_free(m);

    /* a batch-dependent value read as data cannot be folded */
    {
        builder bd;
        b_init(&bd, 13);
        b_input(&bd, "x", 2, x_dims);
        b_init_tensor(&bd, "zero", FL_ONNX_INT64, 0, NULL, (const float[]){0});
        b_node(&bd, "Shape", "shape", "x", "s");
        b_node(&bd, "Gather", "gather", "s,zero", "n");
        Onnx__NodeProto *cast = b_node(&bd, "Cast", "cast", "n", "nf");
        b_attr_int(&bd, cast, "to", FL_ONNX_FLOAT);
        b_node(&bd, "Mul", "mul", "x,nf", "y");
        b_output(&bd, "y");
        assert_int_equal(b_load(&bd, &m, &e), FL_ERR_UNSUPPORTED);
        assert_non_null(strstr(e.msg, "cannot fold shape computation 'nf' (read by node 'mul')"));
        assert_non_null(strstr(e.msg, "built.onnx"));
    }

    /* a constant-only sub-graph is left alone: no trial run, so free non-batch dims are fine */
    builder b;
    const int64_t free2[2] = {0, 0}, one[1] = {1};
    b_init(&b, 13);
    b_input(&b, "x", 2, free2);
    b_init_tensor(&b, "c", FL_ONNX_FLOAT, 1, one, (const float[]){3});
    b_init_tensor(&b, "axes", FL_ONNX_INT64, 1, one, (const float[]){0});
    b_node(&b, "Unsqueeze", "unsq", "c,axes", "c2");
    b_node(&b, "Mul", "mul", "x,c2", "y");
    b_output(&b, "y");
    if (b_load(&b, &m, &e) != FL_OK) fail_msg("%s", e.msg);
    assert_int_equal(m->n_nodes, 2);
    int64_t s35[2] = {3, 5};
    x = tu_tensor(2, s35, NULL, 0, 0);
    x.data[14] = 2;
    forward_ok(m, &x);
    assert_float_equal(fl_model_output(m, 0)->data[14], 6, 0);
    fl_tensor_free(&x);
    fl_model_free(m);

    /* with a fixed batch it is a plain constant */
    if (shape_chain(0, 2, &m, &e) != FL_OK) fail_msg("%s", e.msg);
    v = fl_model_find(m, "shp");
    assert_float_equal(m->values[v].t.data[0], -1, 0);
    assert_float_equal(m->values[v].t.data[1], 2, 0);
    fl_model_free(m);
}

/* ViT's class token as torch 1.13 exports token.expand(x.size(0), -1, -1): the size [N,-1,-1]
 * from a Shape chain, -1 replaced by 1 through ConstantOfShape / Mul / Equal / Where, then
 * Expand(token [1,1,4]) and Concat with x [N,2,4]. The size depends on the batch and no
 * constant can say "the batch" to Expand, so the chain stays computed and the load works for
 * any batch. */
static void test_fold_keeps_expand_shape(void **state) {
    fl_err e = {0};
    fl_model *m;
    builder b;
    const int64_t xd[3] = {0, 2, 4}, one[1] = {1}, two[1] = {2}, tokd[3] = {1, 1, 4};
    b_init(&b, 13);
    b_input(&b, "x", 3, xd);
    b_init_tensor(&b, "zero", FL_ONNX_INT64, 0, NULL, (const float[]){0});
    b_init_tensor(&b, "axes", FL_ONNX_INT64, 1, one, (const float[]){0});
    b_init_tensor(&b, "m1m1", FL_ONNX_INT64, 1, two, (const float[]){-1, -1});
    b_init_tensor(&b, "flat", FL_ONNX_INT64, 1, one, (const float[]){-1});
    b_init_tensor(&b, "neg", FL_ONNX_INT64, 0, NULL, (const float[]){-1});
    b_init_tensor(&b, "token", FL_ONNX_FLOAT, 3, tokd, (const float[]){1, 2, 3, 4});
    b_node(&b, "Shape", "shape", "x", "s");
    b_node(&b, "Gather", "gather", "s,zero", "n");
    b_node(&b, "Unsqueeze", "unsq", "n,axes", "n1");
    Onnx__NodeProto *c = b_node(&b, "Concat", "concat", "n1,m1m1", "size0");
    b_attr_int(&b, c, "axis", 0);
    b_node(&b, "Reshape", "reshape", "size0,flat", "size");
    b_node(&b, "Shape", "shape2", "size", "ssize");
    Onnx__NodeProto *k = b_node(&b, "ConstantOfShape", "ones", "ssize", "ones");
    Onnx__AttributeProto *a = b_attr(&b, k, "value");
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    a->t = b_tensor(&b, NULL, FL_ONNX_INT64, 1, one, (const float[]){1});
    b_node(&b, "Mul", "mul", "ones,neg", "negs");
    b_node(&b, "Equal", "equal", "size,negs", "is_m1");
    b_node(&b, "Where", "where", "is_m1,ones,size", "size1");
    b_node(&b, "Expand", "expand", "token,size1", "tokens");
    c = b_node(&b, "Concat", "cat", "tokens,x", "y");
    b_attr_int(&b, c, "axis", 1);
    b_output(&b, "y");
    if (b_load(&b, &m, &e) != FL_OK) fail_msg("%s", e.msg);
    assert_int_equal(count_op(m, "Expand"), 1);
    assert_int_equal(count_op(m, "Where"), 1); /* kept: it computes Expand's shape per batch */
    for (int64_t batch = 2; batch <= 5; batch += 3) {
        int64_t shape[3] = {batch, 2, 4};
        fl_tensor x = tu_tensor(3, shape, NULL, 0, 0);
        forward_ok(m, &x);
        const fl_tensor *y = fl_model_output(m, 0);
        assert_int_equal(y->ndim, 3);
        assert_int_equal(y->shape[0], batch);
        assert_int_equal(y->shape[1], 3);
        assert_float_equal(y->data[(batch - 1) * 12 + 3], 4, 0); /* the last example's token */
        fl_tensor_free(&x);
    }
    int64_t s3[3] = {3, 2, 4};
    fl_tensor x = tu_tensor(3, s3, NULL, 0, 0);
    roundtrip(m, &x, "vit_token.onnx");
    fl_tensor_free(&x);
    fl_model_free(m);
}

/* A Reshape shape [N,-1] that is also read by a chain which stays computed (Max -> Expand's
 * shape) keeps its batch entry: folding it to [0,-1] would make the Expand [1,4], not [N,4]. */
static void test_fold_shared_reshape_shape(void **state) {
    fl_err e = {0};
    fl_model *m;
    builder b;
    const int64_t one[1] = {1}, two[1] = {2}, tokd[2] = {1, 4};
    b_init(&b, 13);
    b_input(&b, "x", 2, x_dims);
    b_init_tensor(&b, "zero", FL_ONNX_INT64, 0, NULL, (const float[]){0});
    b_init_tensor(&b, "axes", FL_ONNX_INT64, 1, one, (const float[]){0});
    b_init_tensor(&b, "minus1", FL_ONNX_INT64, 1, one, (const float[]){-1});
    b_init_tensor(&b, "floor", FL_ONNX_INT64, 1, two, (const float[]){1, 1});
    b_init_tensor(&b, "token", FL_ONNX_FLOAT, 2, tokd, (const float[]){1, 2, 3, 4});
    b_node(&b, "Shape", "shape", "x", "s");
    b_node(&b, "Gather", "gather", "s,zero", "n");
    b_node(&b, "Unsqueeze", "unsq", "n,axes", "n1");
    Onnx__NodeProto *c = b_node(&b, "Concat", "concat", "n1,minus1", "shp");
    b_attr_int(&b, c, "axis", 0);
    b_node(&b, "Reshape", "reshape", "x,shp", "xr");
    b_node(&b, "Max", "max", "shp,floor", "eshape");
    b_node(&b, "Expand", "expand", "token,eshape", "tokens");
    c = b_node(&b, "Concat", "cat", "xr,tokens", "y");
    b_attr_int(&b, c, "axis", 0);
    b_output(&b, "y");
    if (b_load(&b, &m, &e) != FL_OK) fail_msg("%s", e.msg);
    for (int64_t batch = 2; batch <= 3; batch++) {
        int64_t shape[2] = {batch, 4};
        fl_tensor x = tu_tensor(2, shape, NULL, 0, 0);
        forward_ok(m, &x);
        assert_int_equal(fl_model_output(m, 0)->shape[0], 2 * batch);
        fl_tensor_free(&x);
    }
    fl_model_free(m);
}

/* ---- TensorProto files ------------------------------------------------------------------------- */
static void test_tensor_files(void **state) {
    fl_err e = {0};
    int64_t shape[2] = {2, 3};
    fl_tensor t = tu_tensor(2, shape, NULL, 0, 0), r = {0};
    const float v[6] = {1, -2, 3, 40000, -5e6f, 0};
    memcpy(t.data, v, sizeof v);
    for (int k = 0; k < 3; k++) {
        int dt = k == 0 ? FL_ONNX_FLOAT : k == 1 ? FL_ONNX_INT64 : FL_ONNX_INT32, got = -1;
        assert_int_equal(fl_onnx_write_tensor(tmp("t.pb"), &t, dt, "t", &e), FL_OK);
        assert_int_equal(fl_onnx_read_tensor(tmp("t.pb"), &r, &got, &e), FL_OK);
        assert_int_equal(got, dt);
        assert_true(fl_tensor_same_shape(&t, &r));
        assert_memory_equal(t.data, r.data, sizeof v);
        fl_tensor_free(&r);
    }
    /* bool and the small integer types: written in their own width, clamped to their range */
    const struct { int dt; float want[6]; } small[] = {
        {FL_ONNX_BOOL, {1, 1, 1, 1, 1, 0}},
        {FL_ONNX_INT8, {1, -2, 3, 127, -128, 0}},
        {FL_ONNX_UINT8, {1, 0, 3, 255, 0, 0}},
        {FL_ONNX_INT16, {1, -2, 3, 32767, -32768, 0}},
        {FL_ONNX_UINT16, {1, 0, 3, 40000, 0, 0}},
    };
    for (size_t k = 0; k < sizeof small / sizeof small[0]; k++) {
        int got = -1;
        assert_true(fl_onnx_dtype_supported(small[k].dt));
        assert_int_equal(fl_onnx_write_tensor(tmp("t.pb"), &t, small[k].dt, "t", &e), FL_OK);
        assert_int_equal(fl_onnx_read_tensor(tmp("t.pb"), &r, &got, &e), FL_OK);
        assert_int_equal(got, small[k].dt);
        assert_memory_equal(r.data, small[k].want, sizeof v);
        fl_tensor_free(&r);
    }
    assert_false(fl_onnx_dtype_supported(11)); /* double */
    t.data[0] = 2.6f; /* integers are rounded */
    assert_int_equal(fl_onnx_write_tensor(tmp("t.pb"), &t, FL_ONNX_INT64, "t", &e), FL_OK);
    assert_int_equal(fl_onnx_read_tensor(tmp("t.pb"), &r, NULL, &e), FL_OK);
    assert_float_equal(r.data[0], 3, 0);
    fl_tensor_free(&r);
    /* a truncated file */
    assert_int_equal(fl_file_write_atomic(tmp("bad.pb"), "\x08\x02\x08", 3, &e), FL_OK);
    assert_int_equal(fl_onnx_read_tensor(tmp("bad.pb"), &r, NULL, &e), FL_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "bad.pb"));
    assert_null(r.data);
    fl_tensor_free(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_versions),
        cmocka_unit_test(test_parity_opset13),      cmocka_unit_test(test_parity_opset9),
        cmocka_unit_test(test_onnx_checker_available),
        cmocka_unit_test(test_roundtrip_parity),    cmocka_unit_test(test_roundtrip_zoo),
        cmocka_unit_test(test_truncated),           cmocka_unit_test(test_corrupted),
        cmocka_unit_test(test_unsupported_op),      cmocka_unit_test(test_bad_graphs),
        cmocka_unit_test(test_fold_keeps_expand_shape),
        cmocka_unit_test(test_fold_shared_reshape_shape),
        cmocka_unit_test(test_inputs_constants_names), cmocka_unit_test(test_fold),
        cmocka_unit_test(test_tensor_files),        cmocka_unit_test(test_metadata),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
