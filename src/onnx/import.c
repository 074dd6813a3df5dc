/* ONNX import: ModelProto -> fl_model.
 *
 * The order of work matters:
 *   1. the default-domain opset is read first, because op init callbacks read m->opset;
 *   2. initializers, graph inputs, Constant outputs and every node output become values
 *      before any node is added, so a node may refer to a value produced later in the file
 *      (fl_model_finish sorts the nodes afterwards);
 *   3. nodes are added: fl_model_add_node looks the op up in the table and the op's init
 *      rejects unsupported attributes, each naming the node;
 *   4. float initializers that feed a weight slot are promoted to FL_VAL_PARAM;
 *   5. shape sub-graphs are folded into constants (fold.c).
 * Every name and index read from the file is checked before use: a corrupted file must end
 * in an error that names it, never in a crash.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_int.h"

/* The default-domain opsets flare reads. Every supported op is handled in every version
 * these opsets put in force — the differences between versions (attributes that became
 * inputs, added attributes and modes) are each op's business, decided from m->opset or from
 * the node's own spelling. Before opset 7 many ops still had consumed_inputs and legacy
 * broadcasting; after 21 nothing is known. */
#define FL_OPSET_MIN 7
#define FL_OPSET_MAX 21

typedef struct loader {
    const char *file; /* for messages */
    fl_model *m;
    const Onnx__ModelProto *mp;
    const Onnx__GraphProto *g;
    fl_err *e;
} loader;

static char *node_name(loader *L, const Onnx__NodeProto *np, size_t index);

static int is_default_domain(const char *d) { return !d || !*d || strcmp(d, "ai.onnx") == 0; }

static fl_status read_opset(loader *L, const Onnx__ModelProto *mp) {
    int64_t v = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        if (o && is_default_domain(o->domain) && o->has_version) v = o->version;
    }
    if (v < 0 && mp->n_opset_import == 0) /* required since IR version 3 */
        return fl_fail(L->e, FL_ERR_FORMAT, "%s: the model declares no operator set", L->file);
    if (v < 0)
        return fl_fail(L->e, FL_ERR_UNSUPPORTED,
                       "%s: no operator set of the default ONNX domain (flare supports opsets %d..%d of it)",
                       L->file, FL_OPSET_MIN, FL_OPSET_MAX);
    if (v >= FL_OPSET_MIN && v <= FL_OPSET_MAX) {
        L->m->opset = (int)v;
        return FL_OK;
    }
    /* named with the first node, whose op's version at that opset flare cannot know */
    const Onnx__NodeProto *np = L->g && L->g->n_node && L->g->node[0] && L->g->node[0]->op_type
                                    ? L->g->node[0] : NULL;
    char *name = np ? node_name(L, np, 0) : NULL;
    if (name)
        fl_fail(L->e, FL_ERR_UNSUPPORTED,
                "%s: node '%s' (%s): opset %lld of the default ONNX domain is not supported (%d..%d are)",
                L->file, name, np->op_type, (long long)v, FL_OPSET_MIN, FL_OPSET_MAX);
    else
        fl_fail(L->e, FL_ERR_UNSUPPORTED,
                "%s: opset %lld of the default ONNX domain is not supported (%d..%d are)", L->file,
                (long long)v, FL_OPSET_MIN, FL_OPSET_MAX);
    free(name);
    return FL_ERR_UNSUPPORTED;
}


/* Re-fail with the file name in front of the message a model.c call left in L->e. */
static fl_status with_file(loader *L, fl_status st) {
    char msg[sizeof L->e->msg];
    memcpy(msg, L->e->msg, sizeof msg);
    return fl_fail(L->e, st, "%s: %s", L->file, msg);
}

/* The same for a node that op's init refused: the op's version in force follows, since what
 * an op accepts depends on it ("... antialias is not supported (Resize-18 at opset 19)"). */
static fl_status with_version(loader *L, const char *op, fl_status st) {
    if (st != FL_ERR_UNSUPPORTED) return with_file(L, st);
    char msg[sizeof L->e->msg];
    memcpy(msg, L->e->msg, sizeof msg);
    return fl_fail(L->e, st, "%s: %s (%s-%d at opset %d)", L->file, msg, op,
                   fl_onnx_op_version(op, L->m->opset), L->m->opset);
}

/* ---- values ------------------------------------------------------------------------------------ */
static fl_status add_initializer(loader *L, Onnx__TensorProto *tp) {
    char what[400];
    if (!tp || !tp->name || !*tp->name)
        return fl_fail(L->e, FL_ERR_FORMAT, "%s: an initializer has no name", L->file);
    snprintf(what, sizeof what, "%s: initializer '%s'", L->file, tp->name);
    fl_tensor t;
    int dt;
    fl_status st = fl_onnx_tensor_take(tp, &t, &dt, what, L->e);
    if (st != FL_OK) return st;
    int v = fl_model_add_value_take(L->m, tp->name, FL_VAL_CONST, &t, L->e);
    if (v < 0) return with_file(L, L->e->status);
    L->m->values[v].onnx_dtype = dt;
    return FL_OK;
}

/* Element type and declared shape of a graph input / output. Shapes are optional in ONNX;
 * unknown and symbolic dims are 0 ("free"). */
static fl_status read_value_info(loader *L, const Onnx__ValueInfoProto *vi, const char *role,
                                 int *dtype, fl_tensor *decl) {
    memset(decl, 0, sizeof *decl);
    *dtype = FL_ONNX_FLOAT;
    const Onnx__TypeProto *tp = vi->type;
    if (!tp) return FL_OK;
    if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return fl_fail(L->e, FL_ERR_UNSUPPORTED, "%s: graph %s '%s' is not a tensor", L->file,
                       role, vi->name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (tt->has_elem_type) *dtype = tt->elem_type;
    if (!tt->shape) return FL_OK;
    if (tt->shape->n_dim > FL_MAX_DIMS)
        return fl_fail(L->e, FL_ERR_UNSUPPORTED, "%s: graph %s '%s' has %zu dimensions (at most %d)",
                       L->file, role, vi->name, tt->shape->n_dim, FL_MAX_DIMS);
    int64_t shape[FL_MAX_DIMS];
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        int fixed = d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        shape[i] = fixed && d->dim_value > 0 ? d->dim_value : 0;
        if (fixed && d->dim_value > ((int64_t)1 << 40))
            return fl_fail(L->e, FL_ERR_FORMAT, "%s: graph %s '%s': dimension %zu is too large",
                           L->file, role, vi->name, i);
    }
    fl_tensor_set_shape(decl, (int)tt->shape->n_dim, shape);
    return FL_OK;
}

/* The names of vi's symbolic dimensions (dim_param) into names[d], NULL elsewhere: nn info
 * shows them as the file declares them. */
static fl_status dim_names(loader *L, const Onnx__ValueInfoProto *vi, char **names) {
    const Onnx__TypeProto *tp = vi->type;
    const Onnx__TensorShapeProto *sp = tp && tp->tensor_type ? tp->tensor_type->shape : NULL;
    for (size_t d = 0; sp && d < sp->n_dim && d < FL_MAX_DIMS; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = sp->dim[d];
        if (!dim || dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ||
            !dim->dim_param || !*dim->dim_param)
            continue;
        if (!(names[d] = strdup(dim->dim_param)))
            return fl_fail(L->e, FL_ERR_NOMEM, "%s: out of memory", L->file);
    }
    return FL_OK;
}

static int is_initializer(const Onnx__GraphProto *g, const char *name) {
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i] && g->initializer[i]->name && strcmp(g->initializer[i]->name, name) == 0)
            return 1;
    return 0;
}

static fl_status add_graph_inputs(loader *L, int *ins, int *n_ins) {
    *n_ins = 0;
    for (size_t i = 0; i < L->g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = L->g->input[i];
        if (!vi || !vi->name || !*vi->name)
            return fl_fail(L->e, FL_ERR_FORMAT, "%s: graph input %zu has no name", L->file, i);
        if (is_initializer(L->g, vi->name)) continue; /* old exporters list weights as inputs */
        if (*n_ins == 8)
            return fl_fail(L->e, FL_ERR_UNSUPPORTED, "%s: more than 8 graph inputs", L->file);
        int dt;
        fl_tensor decl;
        fl_status st = read_value_info(L, vi, "input", &dt, &decl);
        if (st != FL_OK) return st;
        int v = fl_model_add_value(L->m, vi->name, FL_VAL_INPUT, &decl, L->e);
        if (v < 0) return with_file(L, L->e->status);
        L->m->values[v].onnx_dtype = dt;
        if ((st = dim_names(L, vi, L->m->input_dim_name[*n_ins])) != FL_OK) return st;
        ins[(*n_ins)++] = v;
    }
    return FL_OK;
}

/* ---- attributes -------------------------------------------------------------------------------- */
static void attr_release(fl_attr *a) {
    free(a->ints);
    free(a->floats);
    free(a->s);
    fl_tensor_free(&a->t);
}

/* ONNX attribute -> fl_attr (name borrowed from ap; the rest owned by `a`). */
static fl_status read_attr(loader *L, const char *node, const char *op,
                           const Onnx__AttributeProto *ap, fl_attr *a) {
    memset(a, 0, sizeof *a);
    if (!ap || !ap->name || !*ap->name)
        return fl_fail(L->e, FL_ERR_FORMAT, "%s: node '%s' (%s): an attribute has no name", L->file,
                       node, op);
    a->name = ap->name;
    if (ap->ref_attr_name && *ap->ref_attr_name)
        return fl_fail(L->e, FL_ERR_UNSUPPORTED, "%s: node '%s' (%s): attribute '%s' refers to a function attribute",
                       L->file, node, op, ap->name);
    int type = ap->has_type ? (int)ap->type : 0;
    switch (type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
        a->type = FL_ATTR_INT;
        a->i = ap->i;
        return FL_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
        a->type = FL_ATTR_FLOAT;
        a->f = ap->f;
        return FL_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        a->type = FL_ATTR_INTS;
        a->n = (int)ap->n_ints;
        if (ap->n_ints > (1u << 24)) break;
        a->ints = malloc(sizeof(int64_t) * (ap->n_ints + 1));
        if (!a->ints) break;
        if (ap->n_ints) memcpy(a->ints, ap->ints, sizeof(int64_t) * ap->n_ints);
        return FL_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        a->type = FL_ATTR_FLOATS;
        a->n = (int)ap->n_floats;
        if (ap->n_floats > (1u << 24)) break;
        a->floats = malloc(sizeof(float) * (ap->n_floats + 1));
        if (!a->floats) break;
        if (ap->n_floats) memcpy(a->floats, ap->floats, sizeof(float) * ap->n_floats);
        return FL_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        a->type = FL_ATTR_STRING;
        if (ap->s.len && memchr(ap->s.data, 0, ap->s.len))
            return fl_fail(L->e, FL_ERR_UNSUPPORTED, "%s: node '%s' (%s): string attribute '%s' holds a NUL byte",
                           L->file, node, op, ap->name);
        a->s = malloc(ap->s.len + 1);
        if (!a->s) break;
        if (ap->s.len) memcpy(a->s, ap->s.data, ap->s.len);
        a->s[ap->s.len] = 0;
        return FL_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
        char what[400];
        a->type = FL_ATTR_TENSOR;
        if (!ap->t)
            return fl_fail(L->e, FL_ERR_FORMAT, "%s: node '%s' (%s): tensor attribute '%s' is empty",
                           L->file, node, op, ap->name);
        snprintf(what, sizeof what, "%s: node '%s' (%s): attribute '%s'", L->file, node, op, ap->name);
        return fl_onnx_tensor_decode(ap->t, &a->t, &a->t_dtype, what, L->e);
    }
    default:
        return fl_fail(L->e, FL_ERR_UNSUPPORTED,
                       "%s: node '%s' (%s): attribute '%s' has a type flare does not support (%d)",
                       L->file, node, op, ap->name, type);
    }
    return fl_fail(L->e, FL_ERR_NOMEM, "%s: node '%s' (%s): out of memory for attribute '%s'",
                   L->file, node, op, ap->name);
}

/* ---- nodes ---------------------------------------------------------------------------------- */
/* A Constant node becomes a FL_VAL_CONST value named after its output. */
static fl_status add_constant(loader *L, const Onnx__NodeProto *np, const char *node) {
    if (np->n_input != 0 || np->n_output != 1 || np->n_attribute != 1 || !np->output[0] ||
        !*np->output[0])
        return fl_fail(L->e, FL_ERR_FORMAT, "%s: node '%s' (Constant): needs no inputs, one output and one attribute",
                       L->file, node);
    fl_attr a;
    fl_tensor t = {0};
    int dt = FL_ONNX_FLOAT;
    fl_status st = read_attr(L, node, "Constant", np->attribute[0], &a);
    if (st == FL_OK) {
        int64_t n = a.n;
        if (strcmp(a.name, "value") == 0 && a.type == FL_ATTR_TENSOR) {
            t = a.t;
            a.t.data = NULL;
            dt = a.t_dtype;
        } else if (strcmp(a.name, "value_float") == 0 && a.type == FL_ATTR_FLOAT) {
            st = fl_tensor_alloc(&t, 0, NULL);
            if (st == FL_OK) t.data[0] = a.f;
        } else if (strcmp(a.name, "value_int") == 0 && a.type == FL_ATTR_INT) {
            dt = FL_ONNX_INT64;
            st = fl_tensor_alloc(&t, 0, NULL);
            if (st == FL_OK) t.data[0] = (float)a.i;
        } else if (strcmp(a.name, "value_floats") == 0 && a.type == FL_ATTR_FLOATS) {
            st = fl_tensor_alloc(&t, 1, &n);
            for (int64_t i = 0; st == FL_OK && i < n; i++) t.data[i] = a.floats[i];
        } else if (strcmp(a.name, "value_ints") == 0 && a.type == FL_ATTR_INTS) {
            dt = FL_ONNX_INT64;
            st = fl_tensor_alloc(&t, 1, &n);
            for (int64_t i = 0; st == FL_OK && i < n; i++) t.data[i] = (float)a.ints[i];
        } else {
            st = fl_fail(L->e, FL_ERR_UNSUPPORTED, "%s: node '%s' (Constant): unsupported attribute '%s'",
                         L->file, node, a.name);
        }
        if (st == FL_ERR_NOMEM) fl_fail(L->e, st, "%s: node '%s': out of memory", L->file, node);
    }
    attr_release(&a);
    if (st == FL_OK) {
        int v = fl_model_add_value(L->m, np->output[0], FL_VAL_CONST, &t, L->e);
        if (v < 0) st = with_file(L, L->e->status);
        else L->m->values[v].onnx_dtype = dt;
    }
    fl_tensor_free(&t);
    return st;
}

static int is_constant(const Onnx__NodeProto *np) {
    return np->op_type && strcmp(np->op_type, "Constant") == 0 && is_default_domain(np->domain);
}

/* Number of outputs the node really has: trailing "" are omitted optional outputs. */
static size_t used_outputs(const Onnx__NodeProto *np) {
    size_t n = np->n_output;
    while (n > 0 && (!np->output[n - 1] || !*np->output[n - 1])) n--;
    return n;
}

static fl_status add_node(loader *L, const Onnx__NodeProto *np, const char *node) {
    const char *op = np->op_type;
    size_t n_out = used_outputs(np);
    if (np->n_input > 4096 || np->n_attribute > 4096)
        return fl_fail(L->e, FL_ERR_FORMAT, "%s: node '%s' (%s): too many inputs or attributes", L->file, node, op);
    int *in = malloc(sizeof(int) * (np->n_input + 1));
    int *out = malloc(sizeof(int) * (n_out + 1));
    fl_attr *attr = calloc(np->n_attribute + 1, sizeof *attr);
    size_t n_attr = 0;
    fl_status st = in && out && attr ? FL_OK
                                     : fl_fail(L->e, FL_ERR_NOMEM, "%s: node '%s': out of memory", L->file, node);
    for (size_t i = 0; st == FL_OK && i < np->n_input; i++) {
        const char *nm = np->input[i];
        in[i] = nm && *nm ? fl_model_find(L->m, nm) : -1;
        if (nm && *nm && in[i] < 0)
            st = fl_fail(L->e, FL_ERR_FORMAT, "%s: node '%s' (%s): input '%s' is not defined",
                         L->file, node, op, nm);
    }
    for (size_t i = 0; st == FL_OK && i < n_out; i++) {
        const char *nm = np->output[i];
        if (!nm || !*nm) { /* an omitted optional output before a used one: give it a name */
            char buf[300];
            snprintf(buf, sizeof buf, "%s__unused_%zu", node, i);
            out[i] = fl_model_add_value(L->m, buf, FL_VAL_ACT, NULL, L->e);
        } else {
            out[i] = fl_model_find(L->m, nm);
        }
        if (out[i] < 0) st = with_file(L, L->e->status);
    }
    for (; st == FL_OK && n_attr < np->n_attribute; n_attr++)
        st = read_attr(L, node, op, np->attribute[n_attr], &attr[n_attr]);
    if (st == FL_OK) {
        st = fl_model_add_node(L->m, op, node, (int)np->n_input, in, (int)n_out, out, (int)n_attr,
                               attr, L->e);
        if (st != FL_OK) with_version(L, op, st);
    }
    for (size_t i = 0; attr && i < np->n_attribute; i++) attr_release(&attr[i]);
    free(attr);
    free(in);
    free(out);
    return st;
}

/* The node's name, or "<op>_<index>" made unique when the file leaves it empty. */
static char *node_name(loader *L, const Onnx__NodeProto *np, size_t index) {
    if (np->name && *np->name) return strdup(np->name);
    char buf[300];
    for (int k = 0;; k++) {
        if (k == 0) snprintf(buf, sizeof buf, "%s_%zu", np->op_type, index);
        else snprintf(buf, sizeof buf, "%s_%zu_%d", np->op_type, index, k);
        int clash = 0;
        for (size_t j = 0; j < L->g->n_node && !clash; j++)
            clash = L->g->node[j]->name && strcmp(L->g->node[j]->name, buf) == 0;
        if (!clash) return strdup(buf);
    }
}

/* An op younger than the model's opset does not exist there: a node using one is refused
 * rather than run with semantics the model's opset does not define (opversion.c). */
static fl_status check_version(loader *L, const Onnx__NodeProto *np, size_t index) {
    if (fl_onnx_op_version(np->op_type, L->m->opset) != 0) return FL_OK;
    char *name = node_name(L, np, index);
    fl_fail(L->e, FL_ERR_UNSUPPORTED, "%s: node '%s' (%s): %s is not in opset %d of the "
            "default ONNX domain (it was added in opset %d)", L->file, name ? name : "",
            np->op_type, np->op_type, L->m->opset, fl_onnx_op_first_version(np->op_type));
    free(name);
    return FL_ERR_UNSUPPORTED;
}

/* The version of `domain` the model imports, -1 when it imports none. */
static int64_t domain_version(const loader *L, const char *domain) {
    for (size_t i = 0; i < L->mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = L->mp->opset_import[i];
        if (o && o->domain && strcmp(o->domain, domain) == 0 && o->has_version) return o->version;
    }
    return -1;
}

/* Checked before anything else is read, so that a model using an unsupported operator is
 * reported as such (and not, say, for the graph-typed attribute of an If it holds). */
static fl_status check_ops(loader *L) {
    for (size_t i = 0; i < L->g->n_node; i++) {
        const Onnx__NodeProto *np = L->g->node[i];
        if (!np || !np->op_type || !*np->op_type)
            return fl_fail(L->e, FL_ERR_FORMAT, "%s: node %zu has no op_type", L->file, i);
        int foreign = !is_default_domain(np->domain);
        if (!foreign && (is_constant(np) || fl_op_find(np->op_type))) {
            fl_status st = check_version(L, np, i);
            if (st != FL_OK) return st;
            continue;
        }
        char *name = node_name(L, np, i);
        int64_t dv = foreign ? domain_version(L, np->domain) : -1;
        char ver[48] = "";
        if (dv >= 0) snprintf(ver, sizeof ver, " version %lld", (long long)dv);
        if (foreign)
            fl_fail(L->e, FL_ERR_UNSUPPORTED,
                    "%s: node '%s' (%s): operator domain '%s'%s is not supported (only the default ONNX domain)",
                    L->file, name ? name : "", np->op_type, np->domain, ver);
        else
            fl_fail(L->e, FL_ERR_UNSUPPORTED, "%s: node '%s': unsupported operator %s (opset %d)",
                    L->file, name ? name : "", np->op_type, L->m->opset);
        free(name);
        return FL_ERR_UNSUPPORTED;
    }
    return FL_OK;
}

static fl_status add_nodes(loader *L) {
    const Onnx__GraphProto *g = L->g;
    for (size_t i = 0; i < g->n_node; i++) { /* validate, then make every output a value */
        const Onnx__NodeProto *np = g->node[i];
        if (!np || !np->op_type || !*np->op_type)
            return fl_fail(L->e, FL_ERR_FORMAT, "%s: node %zu has no op_type", L->file, i);
        if (is_constant(np)) continue;
        for (size_t k = 0; k < used_outputs(np); k++) {
            if (!np->output[k] || !*np->output[k]) continue;
            if (fl_model_add_value(L->m, np->output[k], FL_VAL_ACT, NULL, L->e) < 0)
                return with_file(L, L->e->status);
        }
    }
    for (size_t i = 0; i < g->n_node; i++) {
        char *name = node_name(L, g->node[i], i);
        if (!name) return fl_fail(L->e, FL_ERR_NOMEM, "%s: out of memory", L->file);
        fl_status st = is_constant(g->node[i]) ? add_constant(L, g->node[i], name)
                                               : add_node(L, g->node[i], name);
        free(name);
        if (st != FL_OK) return st;
    }
    return FL_OK;
}

/* Float initializers feeding a weight slot are trainable. BatchNormalization's running mean
 * and variance are statistics, not weights: they stay constant even if also used elsewhere. */
static int weight_slot(const char *op, int i) {
    static const struct { const char *op; unsigned mask; } slots[] = {
        {"Conv", 6},   {"ConvTranspose", 6}, {"Gemm", 7}, {"MatMul", 3}, {"BatchNormalization", 6},
        {"Add", 3},    {"Sub", 3},           {"Mul", 3},  {"Div", 3},    {"PRelu", 2},
        {"LayerNormalization", 6}, {"InstanceNormalization", 6}, {"GroupNormalization", 6},
        {"Expand", 1}, {"Tile", 1}, /* ViT's class token, expanded over the batch */
    };
    for (size_t k = 0; k < sizeof slots / sizeof slots[0]; k++)
        if (strcmp(slots[k].op, op) == 0) return i < 32 && (slots[k].mask >> i & 1);
    return 0;
}

static void promote_params(fl_model *m, const Onnx__GraphProto *g) {
    uint8_t *stat = calloc((size_t)m->n_values + 1, 1);
    for (int i = 0; i < m->n_nodes; i++) {
        const fl_node *n = &m->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            if (v < 0 || m->values[v].kind != FL_VAL_CONST) continue;
            if (stat && strcmp(n->op->name, "BatchNormalization") == 0 && k >= 3) stat[v] = 1;
            if (weight_slot(n->op->name, k) && m->values[v].onnx_dtype == FL_ONNX_FLOAT &&
                is_initializer(g, m->values[v].name))
                m->values[v].kind = FL_VAL_PARAM;
        }
    }
    for (int v = 0; stat && v < m->n_values; v++)
        if (stat[v]) m->values[v].kind = FL_VAL_CONST;
    free(stat);
}

static fl_status set_outputs(loader *L, const int *ins, int n_ins) {
    int outs[8];
    if (L->g->n_output == 0) return fl_fail(L->e, FL_ERR_FORMAT, "%s: the graph has no outputs", L->file);
    if (L->g->n_output > 8) return fl_fail(L->e, FL_ERR_UNSUPPORTED, "%s: more than 8 graph outputs", L->file);
    for (size_t i = 0; i < L->g->n_output; i++) {
        const Onnx__ValueInfoProto *vi = L->g->output[i];
        if (!vi || !vi->name || !*vi->name)
            return fl_fail(L->e, FL_ERR_FORMAT, "%s: graph output %zu has no name", L->file, i);
        int v = fl_model_find(L->m, vi->name);
        if (v < 0)
            return fl_fail(L->e, FL_ERR_FORMAT, "%s: graph output '%s' is not produced by any node",
                           L->file, vi->name);
        int dt;
        fl_tensor decl;
        fl_status st = read_value_info(L, vi, "output", &dt, &decl);
        if (st != FL_OK) return st;
        if (L->m->values[v].kind == FL_VAL_ACT) L->m->values[v].onnx_dtype = dt;
        L->m->output_decl_ndim[i] = decl.ndim;
        memcpy(L->m->output_decl_shape[i], decl.shape, sizeof decl.shape);
        if ((st = dim_names(L, vi, L->m->output_dim_name[i])) != FL_OK) return st;
        outs[i] = v;
    }
    return fl_model_set_io(L->m, n_ins, ins, (int)L->g->n_output, outs, L->e);
}

fl_status fl_onnx_load_buffer(const uint8_t *buf, size_t len, const char *name, fl_model **out,
                              fl_err *e) {
    *out = NULL;
    if (!name) name = "<buffer>";
    if (!buf || len == 0) return fl_fail(e, FL_ERR_FORMAT, "%s: empty file", name);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(&fl_onnx_allocator, len, buf);
    if (!mp)
        return fl_fail(e, FL_ERR_FORMAT, "%s: not an ONNX model (the protobuf is truncated or corrupted)", name);
    fl_err scratch;
    if (!e) e = &scratch;
    loader L = {.file = name, .mp = mp, .g = mp->graph, .e = e};
    fl_status st = FL_OK;
    int ins[8], n_ins = 0;
    if (!mp->graph) st = fl_fail(e, FL_ERR_FORMAT, "%s: the model has no graph", name);
    if (st == FL_OK && !(L.m = fl_model_new())) st = fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", name);
    if (st == FL_OK) st = read_opset(&L, mp);
    if (st == FL_OK) st = check_ops(&L);
    if (st == FL_OK && mp->producer_name && *mp->producer_name &&
        !(L.m->producer_name = strdup(mp->producer_name)))
        st = fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", name);
    for (size_t i = 0; st == FL_OK && i < mp->n_metadata_props; i++) {
        const Onnx__StringStringEntryProto *kv = mp->metadata_props[i];
        if (kv->key && kv->value) st = fl_model_meta_set(L.m, kv->key, kv->value, e);
    }
    if (st == FL_OK && mp->graph->n_sparse_initializer)
        st = fl_fail(e, FL_ERR_UNSUPPORTED, "%s: sparse initializers are not supported", name);
    for (size_t i = 0; st == FL_OK && i < mp->graph->n_initializer; i++)
        st = add_initializer(&L, mp->graph->initializer[i]);
    if (st == FL_OK) st = add_graph_inputs(&L, ins, &n_ins);
    if (st == FL_OK) st = add_nodes(&L);
    if (st == FL_OK) st = set_outputs(&L, ins, n_ins);
    /* (a graph of Constants only has no nodes left and nothing to sort; fl_model_finish is
     * skipped then because it memcpy()s from a NULL node array) */
    if (st == FL_OK && L.m->n_nodes > 0) {
        st = fl_model_finish(L.m, e);
        if (st != FL_OK) with_file(&L, st);
    }
    if (st == FL_OK) promote_params(L.m, mp->graph);
    if (st == FL_OK) st = fl_onnx_fold_shapes(L.m, name, e);
    onnx__model_proto__free_unpacked(mp, &fl_onnx_allocator);
    if (st != FL_OK) {
        fl_model_free(L.m);
        return st;
    }
    *out = L.m;
    return FL_OK;
}

fl_status fl_onnx_load(const char *path, fl_model **out, fl_err *e) {
    fl_mapped f;
    *out = NULL;
    fl_status st = fl_file_map(path, &f, e);
    if (st != FL_OK) return st;
    st = fl_onnx_load_buffer(f.data, f.len, path, out, e);
    fl_file_unmap(&f);
    if (st == FL_OK && !((*out)->path = strdup(path))) {
        fl_model_free(*out);
        *out = NULL;
        return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
    }
    return st;
}
