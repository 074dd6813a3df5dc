/* The training folder's checkpoints: both networks as ONNX files and their Adam moments as
 * one float32 array [2, n] each (m, then v), plus state.json with the finished epoch and each
 * optimiser's step count. Every file is written atomically and state.json last: a run killed
 * while saving leaves the previous checkpoint readable, never a mix. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "flare/onnx.h"
#include "gan/gan_int.h"

static const char *const net_name[2] = {"gen", "disc"};

static fl_status ckpt_path(char *buf, size_t n, const char *dir, const char *file, fl_err *e) {
    char rel[64];
    snprintf(rel, sizeof rel, "ckpt/%s", file);
    return fl_path_join(buf, n, dir, rel, e);
}

static fl_status save_net(const char *dir, int which, const fz_gan_net *net, fl_err *e) {
    char path[4096], file[32];
    snprintf(file, sizeof file, "%s.onnx", net_name[which]);
    fl_status st = ckpt_path(path, sizeof path, dir, file, e);
    if (!st) st = fl_onnx_save(net->m, path, e);
    float *m, *v;
    int64_t n, *steps;
    fl_optim_state(net->opt, &m, &v, &n, &steps);
    float *both = st ? NULL : malloc(sizeof(float) * (size_t)(2 * n));
    if (!st && !both) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    if (!st) {
        memcpy(both, m, sizeof(float) * (size_t)n);
        memcpy(both + n, v, sizeof(float) * (size_t)n);
        int64_t shape[2] = {2, n};
        snprintf(file, sizeof file, "%s.adam.npy", net_name[which]);
        st = ckpt_path(path, sizeof path, dir, file, e);
        if (!st) st = fl_npy_write(path, FL_DT_F32, 2, shape, both, e);
    }
    free(both);
    return st;
}

fl_status fz_gan_ckpt_save(const char *dir, const fz_gan_net *g, const fz_gan_net *d, int epoch,
                           uint64_t seed, fl_err *e) {
    char path[4096];
    fl_status st = fl_path_join(path, sizeof path, dir, "ckpt", e);
    if (!st) st = fl_mkdirs(path, e);
    if (!st) st = save_net(dir, 0, g, e);
    if (!st) st = save_net(dir, 1, d, e);
    if (st) return st;
    float *m, *v;
    int64_t n, *gs, *ds;
    fl_optim_state(g->opt, &m, &v, &n, &gs);
    fl_optim_state(d->opt, &m, &v, &n, &ds);
    char buf[256];
    int k = snprintf(buf, sizeof buf,
                     "{\"format\": \"" GAN_FORMAT "-checkpoint\", \"epoch\": %d, \"seed\": \"%llu\", "
                     "\"gen_steps\": %lld, \"disc_steps\": %lld}\n",
                     epoch, (unsigned long long)seed, (long long)*gs, (long long)*ds);
    if ((st = ckpt_path(path, sizeof path, dir, "state.json", e))) return st;
    return fl_file_write_atomic(path, buf, (size_t)k, e);
}

static fl_status load_net(const char *dir, int which, fz_gan_net *net, const fl_optim_opts *oo,
                          int64_t steps, fl_err *e) {
    char path[4096], file[32];
    snprintf(file, sizeof file, "%s.onnx", net_name[which]);
    fl_model *m = NULL;
    fl_status st = ckpt_path(path, sizeof path, dir, file, e);
    if (!st) st = fl_onnx_load(path, &m, e);
    if (st) return st;
    fl_optim *opt = NULL;
    if ((st = fl_optim_new(m, oo, &opt, e))) {
        fl_model_free(m);
        return st;
    }
    float *mm, *vv;
    int64_t n, *t;
    fl_optim_state(opt, &mm, &vv, &n, &t);
    snprintf(file, sizeof file, "%s.adam.npy", net_name[which]);
    fl_npy a = {0};
    st = ckpt_path(path, sizeof path, dir, file, e);
    if (!st) st = fl_npy_read(path, &a, e);
    if (!st && (a.dtype != FL_DT_F32 || a.ndim != 2 || a.shape[0] != 2 || a.shape[1] != n))
        st = fl_fail(e, FL_ERR_FORMAT, "%s: not the Adam state of %s (%lld parameters)", path,
                     file, (long long)n);
    if (!st) {
        memcpy(mm, a.data, sizeof(float) * (size_t)n);
        memcpy(vv, (float *)a.data + n, sizeof(float) * (size_t)n);
        *t = steps;
        fl_optim_free(net->opt);
        fl_model_free(net->m);
        net->m = m, net->opt = opt;
    } else {
        fl_optim_free(opt);
        fl_model_free(m);
    }
    fl_npy_free(&a);
    return st;
}

static int64_t count_of(const cJSON *j, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsNumber(v) && fl_whole(v->valuedouble, 0, 9007199254740992.0)
               ? (int64_t)v->valuedouble
               : -1;
}

/* state.json's counters and seed (path: the file, for messages). */
static fl_status read_state(const char *dir, char *path, size_t n, int64_t *ep, int64_t *gs,
                            int64_t *ds, uint64_t *seed, fl_err *e) {
    uint8_t *buf;
    size_t len;
    fl_status st = ckpt_path(path, n, dir, "state.json", e);
    if (!st) st = fl_file_read(path, &buf, &len, e);
    if (st) return st;
    cJSON *j = cJSON_ParseWithLength((const char *)buf, len);
    free(buf);
    *ep = count_of(j, "epoch"), *gs = count_of(j, "gen_steps"), *ds = count_of(j, "disc_steps");
    const cJSON *sj = cJSON_GetObjectItemCaseSensitive(j, "seed");
    char *end = NULL;
    *seed = cJSON_IsString(sj) ? strtoull(sj->valuestring, &end, 10) : 0;
    int seed_ok = end && end != sj->valuestring && !*end;
    cJSON_Delete(j);
    if (*ep < 1 || *ep > 1000000 || *gs < 0 || *ds < 0 || !seed_ok)
        return fl_fail(e, FL_ERR_FORMAT, "%s: not a FuzzGAN checkpoint (needs epoch >= 1, "
                       "seed, gen_steps, disc_steps)", path);
    return FL_OK;
}

fl_status fl_gan_ckpt_seed(const char *work_dir, uint64_t *seed, fl_err *e) {
    char path[4096];
    int64_t ep, gs, ds;
    return read_state(work_dir, path, sizeof path, &ep, &gs, &ds, seed, e);
}

fl_status fz_gan_ckpt_load(const char *dir, fz_gan_net *g, fz_gan_net *d,
                           const fl_optim_opts *oo, uint64_t seed, int *epoch, fl_err *e) {
    char path[4096];
    int64_t ep, gs, ds;
    uint64_t sd;
    fl_status st = read_state(dir, path, sizeof path, &ep, &gs, &ds, &sd, e);
    if (st) return st;
    if (sd != seed)
        return fl_fail(e, FL_ERR_ARG, "%s: the checkpoint was trained with seed %llu, this run "
                       "asks for %llu (resume with -s %llu, or without -s)", path,
                       (unsigned long long)sd, (unsigned long long)seed, (unsigned long long)sd);
    if ((st = load_net(dir, 0, g, oo, gs, e)) || (st = load_net(dir, 1, d, oo, ds, e))) return st;
    *epoch = (int)ep;
    return FL_OK;
}
