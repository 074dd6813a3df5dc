/* The FuzzGAN networks (gan.h): generator G(z, c, l) and ACGAN discriminator D, built with the
 * layer builder of the model zoo (train/build.h), so names and initialisation are PyTorch's.
 * Both halve or double the image twice, hence h and w must be multiples of 4. */
#include "gan/gan_int.h"
#include "train/build.h"

fl_status fz_gan_build_g(int nz, int K, int64_t P, int c, int h, int w, uint64_t seed,
                         fl_model **out, fl_err *e) {
    *out = NULL;
    if (h % 4 || w % 4 || h < 8 || w < 8)
        return fl_fail(e, FL_ERR_SHAPE, "generator: images of %dx%d: both sides must be "
                       "multiples of 4 and at least 8", h, w);
    fl_builder b;
    fl_status st = fl_build_begin(&b, "generator", seed, e);
    int in[3] = {fl_build_input(&b, "z", nz, 0, 0), fl_build_input(&b, "class", K, 0, 0),
                 fl_build_input(&b, "neuron", (int)P, 0, 0)};
    fl_attr axis[1] = {fl_attr_int("axis", 1)};
    fl_build_node(&b, "cat", "Concat", 3, in, 1, axis);
    b.c = nz + K + (int)P;
    fl_build_linear(&b, "fc", GAN_G_CH * (h / 4) * (w / 4));
    fl_build_unflatten(&b, "unflatten", GAN_G_CH, h / 4, w / 4);
    fl_build_batchnorm(&b, "bn0");
    fl_build_act(&b, "relu0", "Relu");
    fl_build_convt(&b, "up1", GAN_G_CH / 2, 4, 2, 1);
    fl_build_batchnorm(&b, "bn1");
    fl_build_act(&b, "relu1", "Relu");
    fl_build_convt(&b, "up2", c, 4, 2, 1);
    b.out_name = "image";
    fl_build_act(&b, "out", "Sigmoid");
    int o = b.cur;
    if (st == FL_OK) st = fl_build_end(&b, 3, in, 1, &o, out);
    return st;
}

fl_status fz_gan_build_d(int K, int c, int h, int w, uint64_t seed, fl_model **out, fl_err *e) {
    *out = NULL;
    fl_builder b;
    fl_status st = fl_build_begin(&b, "discriminator", seed, e);
    int in = fl_build_input(&b, "image", c, h, w);
    fl_build_conv(&b, "conv1", GAN_D_CH, 4, 2, 1);
    fl_build_leaky(&b, "lrelu1", 0.2f);
    fl_build_conv(&b, "conv2", GAN_D_CH * 2, 4, 2, 1);
    fl_build_leaky(&b, "lrelu2", 0.2f);
    fl_build_flatten(&b);
    int feat = b.cur, feat_c = b.c;
    b.out_name = "adv";
    fl_build_linear(&b, "adv", 1);
    int outs[2] = {b.cur, -1};
    b.cur = feat, b.c = feat_c;
    b.out_name = "cls";
    fl_build_linear(&b, "cls", K);
    outs[1] = b.cur;
    if (st == FL_OK) st = fl_build_end(&b, 1, &in, 2, outs, out);
    return st;
}
