/* gan_int.h — the FuzzGAN module's internals, shared by its files:
 *
 *   nets.c    the generator and discriminator architectures
 *   train.c   fl_gan_train: the ACGAN loop with the model under test's two extra losses
 *   ckpt.c    the work folder: checkpoints (both networks and their Adam state), resume
 *   gan.c     fl_gan_open / fl_gan_generate: a trained generator, from its ONNX file
 *
 * Dependencies point one way: train.c calls nets.c and ckpt.c; gan.c stands alone.
 */
#ifndef FLARE_GAN_INT_H
#define FLARE_GAN_INT_H

#include "flare/gan.h"
#include "flare/train.h"

#define GAN_G_CH 64      /* maps of the generator's first (h/4 x w/4) layer */
#define GAN_D_CH 32      /* maps of the discriminator's first convolution */
#define GAN_FORMAT "fuzzgan-1"

fl_status fz_gan_build_g(int nz, int K, int64_t P, int c, int h, int w, uint64_t seed,
                         fl_model **out, fl_err *e);
fl_status fz_gan_build_d(int K, int c, int h, int w, uint64_t seed, fl_model **out, fl_err *e);

/* One network and its optimiser, as a checkpoint holds them. */
typedef struct fz_gan_net {
    fl_model *m;
    fl_optim *opt;
} fz_gan_net;

/* Write work_dir/ckpt/{gen,disc}.onnx, {gen,disc}.adam.npy and state.json (epoch last, the
 * epoch just finished), each atomically; state.json last, so that it only ever names a
 * complete checkpoint. */
fl_status fz_gan_ckpt_save(const char *work_dir, const fz_gan_net *g, const fz_gan_net *d,
                           int epoch, uint64_t seed, fl_err *e);
/* Read the checkpoint: the networks (replacing g->m and d->m, whose optimisers are rebuilt
 * with oo) and their Adam state; *epoch = the last finished epoch. The seed it was trained
 * with must be `seed`. */
fl_status fz_gan_ckpt_load(const char *work_dir, fz_gan_net *g, fz_gan_net *d,
                           const fl_optim_opts *oo, uint64_t seed, int *epoch, fl_err *e);

#endif
