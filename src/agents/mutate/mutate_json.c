/* JSON operators: when a turn is a JSON object (agents are often handed structured requests),
 * add a field, remove one, change a value's type, or break the syntax on purpose.
 * json_add / json_del / json_retype always produce valid JSON (printed compactly by cJSON);
 * json_break never tries to. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "agents/mutate/mutate_int.h"

static cJSON *parse_object(const char *s, size_t n) {
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    if (i == n || s[i] != '{') return NULL; /* cheap test before parsing */
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(s, n, &end, 0);
    if (!j) return NULL;
    while (end < s + n && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')) end++;
    if (end != s + n || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* Reservoir-sample one node of the tree: objects only (want_obj), or any non-root value
 * together with its parent. */
typedef struct pick {
    fl_rng *r;
    size_t cnt;
    cJSON *node, *parent;
} pick;

static void walk(pick *p, cJSON *node, cJSON *parent, int want_obj) {
    int take = want_obj ? cJSON_IsObject(node) : parent != NULL;
    if (take && fl_rng_below(p->r, (uint32_t)++p->cnt) == 0) p->node = node, p->parent = parent;
    for (cJSON *c = node->child; c; c = c->next) walk(p, c, node, want_obj);
}

static int emit(cJSON *root, fl_sb *o) {
    char *txt = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!txt) {
        o->oom = 1;
        return 0;
    }
    fl_sb_puts(o, txt);
    cJSON_free(txt);
    return 1;
}

/* The end of an edit that put v into root: emit root when it went in (ok), else free both
 * and report out of memory. */
static int emit_edit(int ok, cJSON *v, cJSON *root, fl_sb *o) {
    if (ok) return emit(root, o);
    cJSON_Delete(v);
    cJSON_Delete(root);
    o->oom = 1;
    return 0;
}

static const double NUMS[] = {0, -1, 1, 1e308, -1e308, 2147483648.0, -2147483649.0,
                              9007199254740993.0, 0.1, 1e-300, 4294967296.0, 65536};

/* A value of the given type (0 string, 1 number, 2 bool, 3 null, 4 object, 5 array). */
static cJSON *make_value(mt_env *env, int type) {
    fl_rng *r = env->r;
    switch (type) {
    case 0: {
        const char *s;
        switch (fl_rng_below(r, 5)) {
        case 0: s = (s = mt_dict_pick(env)) ? s : ""; break;
        case 1: s = MT_PICKL(r, mt_inject_en); break;
        case 2: s = MT_PICKL(r, mt_extreme_num); break;
        case 3: s = MT_PICKL(r, mt_unicode_odd); break;
        default: s = MT_PICKL(r, mt_words_en); break;
        }
        return cJSON_CreateString(s);
    }
    case 1: return cJSON_CreateNumber(NUMS[fl_rng_below(r, sizeof NUMS / sizeof NUMS[0])]);
    case 2: return cJSON_CreateBool(fl_rng_below(r, 2));
    case 3: return cJSON_CreateNull();
    case 4: {
        cJSON *o = cJSON_CreateObject();
        if (o && fl_rng_below(r, 2)) cJSON_AddStringToObject(o, "role", "admin");
        return o;
    }
    default: {
        cJSON *a = cJSON_CreateArray();
        if (a && fl_rng_below(r, 2)) {
            cJSON_AddItemToArray(a, cJSON_CreateNumber(1));
            cJSON_AddItemToArray(a, cJSON_CreateString("a"));
            cJSON_AddItemToArray(a, cJSON_CreateNull());
        }
        return a;
    }
    }
}

static int type_of(const cJSON *j) {
    if (cJSON_IsString(j)) return 0;
    if (cJSON_IsNumber(j)) return 1;
    if (cJSON_IsBool(j)) return 2;
    if (cJSON_IsNull(j)) return 3;
    if (cJSON_IsObject(j)) return 4;
    return 5;
}

int mt_op_json_add(mt_env *env, const char *s, size_t n, fl_sb *o) {
    cJSON *root = parse_object(s, n);
    if (!root) return 0;
    pick p = {env->r, 0, NULL, NULL};
    walk(&p, root, NULL, 1);
    cJSON *obj = p.node;
    /* a duplicate key (legal JSON, handled differently by every parser) or a suspicious one */
    const char *key = MT_PICKL(env->r, mt_json_keys);
    if (obj->child && fl_rng_below(env->r, 4) == 0) {
        int k = cJSON_GetArraySize(obj);
        key = cJSON_GetArrayItem(obj, (int)fl_rng_below(env->r, (uint32_t)k))->string;
    }
    cJSON *v = make_value(env, (int)fl_rng_below(env->r, 6));
    return emit_edit(v && cJSON_AddItemToObject(obj, key, v), v, root, o);
}

int mt_op_json_del(mt_env *env, const char *s, size_t n, fl_sb *o) {
    cJSON *root = parse_object(s, n);
    if (!root) return 0;
    pick p = {env->r, 0, NULL, NULL};
    walk(&p, root, NULL, 0);
    if (!p.cnt) {
        cJSON_Delete(root);
        return 0; /* {} has nothing to remove */
    }
    cJSON_Delete(cJSON_DetachItemViaPointer(p.parent, p.node));
    return emit(root, o);
}

int mt_op_json_retype(mt_env *env, const char *s, size_t n, fl_sb *o) {
    fl_rng *r = env->r;
    cJSON *root = parse_object(s, n);
    if (!root) return 0;
    pick p = {r, 0, NULL, NULL};
    walk(&p, root, NULL, 0);
    if (!p.cnt) {
        cJSON_Delete(root);
        return 0;
    }
    int from = type_of(p.node), to = (int)fl_rng_below(r, 5);
    if (to >= from) to++;
    cJSON *v = NULL;
    if (to == 0 && from == 1) { /* 42 -> "42" */
        char *t = cJSON_PrintUnformatted(p.node);
        v = t ? cJSON_CreateString(t) : NULL;
        cJSON_free(t);
    } else if (to == 1 && from == 0) { /* "42" -> 42, "abc" -> an extreme number */
        char *end;
        double d = strtod(p.node->valuestring, &end);
        v = end != p.node->valuestring && !*end && d == d && d - d == 0
                ? cJSON_CreateNumber(d) : make_value(env, 1);
    } else if (to >= 4 && fl_rng_below(r, 2)) { /* wrap: x -> [x] or {"value": x} */
        cJSON *copy = cJSON_Duplicate(p.node, 1);
        v = to == 4 ? cJSON_CreateObject() : cJSON_CreateArray();
        if (v && copy) {
            if (to == 4) cJSON_AddItemToObject(v, "value", copy);
            else cJSON_AddItemToArray(v, copy);
        } else {
            cJSON_Delete(copy);
        }
    } else {
        v = make_value(env, to);
    }
    if (v && p.node->string && !(p.node->type & cJSON_StringIsConst)) {
        /* ReplaceItemViaPointer keeps no key: hand the old member's key to the new value */
        v->string = p.node->string;
        p.node->string = NULL;
    }
    return emit_edit(v && cJSON_ReplaceItemViaPointer(p.parent, p.node, v), v, root, o);
}

int mt_op_json_break(mt_env *env, const char *s, size_t n, fl_sb *o) {
    fl_rng *r = env->r;
    cJSON *root = parse_object(s, n);
    if (!root) return 0;
    cJSON_Delete(root);
    const char *last = s + n;
    while (last > s && last[-1] != '}') last--;
    size_t close = (size_t)(last - s) - 1; /* the final '}' (exists: s is an object) */
    switch (fl_rng_below(r, 5)) {
    case 0: { /* truncated mid-way */
        size_t u = mt_u8_count(s, n);
        fl_sb_put(o, s, mt_u8_offset(s, n, 1 + fl_rng_below(r, (uint32_t)(u - 1))));
        return 1;
    }
    case 1: { /* one structural character missing */
        size_t cnt = 0, at = 0;
        for (size_t i = 0; i < n; i++)
            if (strchr("{}[]:,\"", s[i]) && s[i] && fl_rng_below(r, (uint32_t)++cnt) == 0) at = i;
        fl_sb_put(o, s, at);
        fl_sb_put(o, s + at + 1, n - at - 1);
        return 1;
    }
    case 2: /* trailing comma */
        fl_sb_put(o, s, close);
        fl_sb_puts(o, ",");
        break;
    case 3: { /* JavaScript, not JSON: single quotes, NaN, a comment */
        static const char *const JS[] = {",'mode':'debug'", ",\"x\":NaN", ",\"y\":Infinity",
                                         " /* comment */", ",unquoted:1", ",\"z\":undefined"};
        fl_sb_put(o, s, close);
        fl_sb_puts(o, MT_PICK(r, JS));
        break;
    }
    default: /* something after the object */
        fl_sb_put(o, s, n);
        fl_sb_puts(o, fl_rng_below(r, 2) ? "}" : " {\"again\":true}");
        return 1;
    }
    fl_sb_put(o, s + close, n - close);
    return 1;
}
