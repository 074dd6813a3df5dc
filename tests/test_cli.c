/* The `flare` binary, driven as a user would: exit statuses, messages, help texts generated
 * from flags.def, and a tiny train -> info -> eval -> run round trip on Fashion-MNIST.
 *
 * The binary is $FLARE_BIN (tests/run.sh sets it; build/flare when unset). Everything is
 * written under a fresh temporary directory, removed at the end. */
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "testutil.h"

#include "cli/cli.h"
#include "flare/data.h"
#include "flare/onnx.h"
#include "flare/train.h"

/* flags.def, as the test sees it: which commands take which --name, and which are required. */
static const char required_[] = "required";
#define REQUIRED required_
#define NONE NULL
static const struct {
    unsigned cmds;
    const char *name;
    char shrt;
    const char *dflt;
} flag_table[] = {
#define FLAG(cmds_, FIELD, name_, short_, TYPE, dflt_, help_) {(cmds_), (name_), (short_), (dflt_)},
#include "cli/flags.def"
};
enum { N_FLAGS = sizeof flag_table / sizeof flag_table[0] };
/* ALIAS entries: the flag (index into flag_table) they are another spelling of */
static const struct {
    unsigned cmds;
    int flag;
    const char *name;
    char shrt;
} alias_table[] = {
#define ALIAS(cmds_, FIELD, name_, short_) {(cmds_), F_##FIELD, (name_), (short_)},
#include "cli/flags.def"
    {0, -1, NULL, 0},
};
static const struct {
    int cmd;
    const char *args;
} example_table[] = {
#define EXAMPLE(ID, args_, comment_) {CMD_##ID, (args_)},
#include "cli/flags.def"
    {-1, NULL},
};
static const char *const cmd_names[CMD_COUNT_] = {
#define COMMAND(ID, group, verb, handler, summary) [CMD_##ID] = group " " verb,
#include "cli/flags.def"
};

static char tmp[64];   /* the temporary directory */
static char model[96]; /* the model trained by test_train, shared by the tests after it */
static int have_data;  /* Fashion-MNIST is installed */

#define F "\"$FLARE_BIN\" "

typedef struct res {
    int rc;
    char *out;
} res;

/* Run a shell command line; capture stdout (and stderr when merge). */
static res run(int merge, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static res run(int merge, const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    assert_true(n > 0 && n + 16 < (int)sizeof cmd);
    strcat(cmd, merge ? " 2>&1" : " 2>/dev/null");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 4096, len = 0;
    char *out = malloc(cap);
    assert_non_null(out);
    size_t got;
    while ((got = fread(out + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (cap - len < 1024) {
            cap *= 2;
            out = realloc(out, cap);
            assert_non_null(out);
        }
    }
    out[len] = 0;
    int st = pclose(p);
    res r = {WIFEXITED(st) ? WEXITSTATUS(st) : 128, out};
    return r;
}

#define assert_contains(hay, needle)                                                           \
    do {                                                                                       \
        if (!strstr((hay), (needle)))                                                          \
            fail_msg("expected \"%s\" in output:\n%s", (needle), (hay));                       \
    } while (0)

static void expect(res r, int rc, const char *needle) {
    if (r.rc != rc) fail_msg("exit status %d, expected %d; output:\n%s", r.rc, rc, r.out);
    if (needle) assert_contains(r.out, needle);
    free(r.out);
}

static cJSON *parse_json(const char *text) {
    cJSON *j = cJSON_Parse(text);
    if (!j) fail_msg("not JSON:\n%s", text);
    return j;
}

static double num(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v)) fail_msg("JSON key \"%s\" missing or not a number", key);
    return v->valuedouble;
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---- help and version ----------------------------------------------------------------------- */
static void test_version(void **state) {
    expect(run(1, F "--version"), 0, "flare " FLARE_VERSION);
}

static void test_help_texts(void **state) {
    res main_help = run(0, F "--help");
    assert_int_equal(main_help.rc, 0);
    res help_cmd = run(0, F "help");
    assert_string_equal(main_help.out, help_cmd.out);
    for (int c = 0; c < CMD_COUNT_; c++) {
        assert_contains(main_help.out, cmd_names[c]);
        res h = run(0, F "%s --help", cmd_names[c]);
        assert_int_equal(h.rc, 0);
        res h2 = run(0, F "help %s", cmd_names[c]);
        assert_int_equal(h2.rc, 0);
        assert_string_equal(h.out, h2.out);
        for (int i = 0; i < N_FLAGS; i++) {
            char want[96];
            snprintf(want, sizeof want, "--%s", flag_table[i].name);
            int takes = (flag_table[i].cmds >> c) & 1;
            /* every flag of the command is described, and its default shown */
            if (takes) {
                assert_contains(h.out, want);
                assert_contains(main_help.out, want);
                if (flag_table[i].dflt == required_) assert_contains(h.out, "(required)");
                else if (flag_table[i].dflt && strcmp(flag_table[i].dflt, "false")) {
                    snprintf(want, sizeof want, "(default: %s)", flag_table[i].dflt);
                    assert_contains(h.out, want);
                }
            }
        }
        free(h.out);
        free(h2.out);
    }
    free(main_help.out);
    free(help_cmd.out);
    expect(run(0, F "nn --help"), 0, "flare nn train --arch");
    expect(run(1, F "nn"), 2, "commands:");
    expect(run(1, F), 2, "usage: flare GROUP VERB");
}

/* The --arch choices in flags.def are the zoo's architectures, all of them. */
static void test_arch_choices_match_zoo(void **state) {
    res h = run(0, F "nn train --help");
    char want[64];
    for (const char *const *a = fl_zoo_names(); *a; a++) {
        snprintf(want, sizeof want, "|%s", *a);
        if (!strstr(h.out, want)) snprintf(want, sizeof want, "%s|", *a);
        assert_contains(h.out, want);
    }
    free(h.out);
}

/* ---- usage errors: exit 2, naming the flag and the command ----------------------------------- */
static void test_usage_errors(void **state) {
    expect(run(1, F "nn train --arch mlp -o x.onnx --bogus 3"), 2, "unknown flag --bogus");
    expect(run(1, F "nn train --arch mlp -o x.onnx --bogus 3"), 2, "flare nn train:");
    expect(run(1, F "nn train --arch mlp -o x.onnx --json"), 2, "nn eval");
    expect(run(1, F "nn train --arch mlp -o x.onnx --epochs abc"), 2, "--epochs");
    expect(run(1, F "nn train --arch mlp -o x.onnx --epochs abc"), 2, "not an integer");
    expect(run(1, F "nn train --arch mlp -o x.onnx --epochs -1"), 2, "out of range");
    expect(run(1, F "nn train --arch mlp -o x.onnx --epochs=0"), 2, "--epochs");
    expect(run(1, F "nn train --arch mlp -o x.onnx -e 99999999999999999999"), 2, "out of range");
    expect(run(1, F "nn train --arch mlp -o x.onnx --lr 0"), 2, "--lr");
    expect(run(1, F "nn train --arch mlp -o x.onnx --lr inf"), 2, "not a finite number");
    expect(run(1, F "nn train --arch mlp -o x.onnx --seed -3"), 2, "--seed");
    expect(run(1, F "nn train --arch mlp -o x.onnx -s 12x"), 2, "--seed");
    expect(run(1, F "nn train --arch resnet -o x.onnx"), 2, "'resnet' is not one of");
    expect(run(1, F "nn train --arch mlp -o x.onnx --optim rmsprop"), 2, "--optim");
    expect(run(1, F "nn train --arch mlp -o"), 2, "missing value for --output");
    expect(run(1, F "nn train --arch mlp -o --epochs 2"), 2, "missing value for --output");
    expect(run(1, F "nn train --arch mlp -o x -e 2 --epochs 3"), 2, "more than once");
    expect(run(1, F "nn eval --model m.onnx stray"), 2, "unexpected argument 'stray'");
    expect(run(1, F "nn eval --model m.onnx --json=maybe"), 2, "--json");
    expect(run(1, F "nn info --model m.onnx --threads -2"), 2, "--threads");
    expect(run(1, F "nn frobnicate"), 2, "unknown command 'nn frobnicate'");
    expect(run(1, F "frobnicate"), 2, "unknown command group");
    expect(run(1, F "--frobnicate"), 2, "unknown flag --frobnicate");
}

/* Leaving out any one required flag is an error naming it. The other required flags get the
 * value "mlp": a valid --arch, and a file name for the rest (never read: parsing fails first). */
static void test_required_flags(void **state) {
    for (int c = 0; c < CMD_COUNT_; c++)
        for (int i = 0; i < N_FLAGS; i++) {
            if (!((flag_table[i].cmds >> c) & 1) || flag_table[i].dflt != required_) continue;
            char args[512] = "", want[96];
            for (int j = 0; j < N_FLAGS; j++)
                if (j != i && ((flag_table[j].cmds >> c) & 1) && flag_table[j].dflt == required_) {
                    size_t k = strlen(args);
                    snprintf(args + k, sizeof args - k, " --%s mlp", flag_table[j].name);
                }
            snprintf(want, sizeof want, "missing required flag --%s", flag_table[i].name);
            res r = run(1, F "%s%s", cmd_names[c], args);
            assert_contains(r.out, cmd_names[c]);
            expect(r, 2, want);
        }
}

/* ---- one vocabulary (docs/cli.md, "One meaning per flag") ------------------------------------ */
/* The entry command c reaches with short form ch (its own or an alias's), or -1. */
static int short_entry(int c, char ch) {
    for (int i = 0; i < N_FLAGS; i++)
        if (((flag_table[i].cmds >> c) & 1) && flag_table[i].shrt == ch) return i;
    for (int a = 0; alias_table[a].name; a++)
        if (((alias_table[a].cmds >> c) & 1) && alias_table[a].shrt == ch) return alias_table[a].flag;
    return -1;
}

/* Does entry i, in command c, answer to --name? */
static int entry_named(int i, int c, const char *name) {
    if (!strcmp(flag_table[i].name, name)) return 1;
    for (int a = 0; alias_table[a].name; a++)
        if (alias_table[a].flag == i && ((alias_table[a].cmds >> c) & 1) &&
            !strcmp(alias_table[a].name, name))
            return 1;
    return 0;
}

/* Rule 1: a short form means one word everywhere: the entries -x reaches in the commands
 * that have it all answer to one common --name. Rule 2: a long name that is a flag's own has
 * the same short form (or none) in every command. Aliases keep old spellings; they obey
 * rule 1 (an alias's short form is that word's everywhere). */
static void test_vocabulary(void **state) {
    for (int ch = 1; ch < 128; ch++) {
        int first = -1, first_cmd = -1;
        for (int c = 0; c < CMD_COUNT_; c++) {
            int i = short_entry(c, (char)ch);
            if (i < 0) continue;
            if (first < 0) {
                first = i, first_cmd = c;
                continue;
            }
            /* some name of the first entry is also a name of this one */
            int common = entry_named(i, c, flag_table[first].name);
            for (int a = 0; !common && alias_table[a].name; a++)
                if (alias_table[a].flag == first && ((alias_table[a].cmds >> first_cmd) & 1))
                    common = entry_named(i, c, alias_table[a].name);
            if (!common)
                fail_msg("-%c is --%s in %s but --%s in %s", ch, flag_table[first].name,
                         cmd_names[first_cmd], flag_table[i].name, cmd_names[c]);
        }
    }
    for (int i = 0; i < N_FLAGS; i++)
        for (int j = i + 1; j < N_FLAGS; j++)
            if (!strcmp(flag_table[i].name, flag_table[j].name) &&
                flag_table[i].shrt != flag_table[j].shrt)
                fail_msg("--%s has short form '%c' in one command and '%c' in another",
                         flag_table[i].name, flag_table[i].shrt ? flag_table[i].shrt : '0',
                         flag_table[j].shrt ? flag_table[j].shrt : '0');
    /* the rules' consequences, as a user sees them */
    expect(run(1, F "agents run -t 5 c.json -- true"), 2, "did you mean -T (--timeout)");
    expect(run(1, F "nn fuzz -m m.onnx -i a -o b -t x"), 2, "--threads");
    expect(run(1, F "nn select -m m.onnx -o s.npy -n x"), 2, "--limit");
    expect(run(1, F "nn sa -k lsa --layer a --help"), 0, "(also --layer)");
}

/* nn run --layers takes what the other commands take: all, conv+dense, NAME,NAME, and
 * repeats; --layer, its old name, still works. The fixture model, random images. */
static void test_run_layer_sets(void **state) {
    const char *lenet = "tests/fixtures/cover/lenet1.onnx";
    int64_t shp[4] = {2, 1, 28, 28};
    fl_tensor x = {0};
    assert_int_equal(fl_tensor_alloc(&x, 4, shp), FL_OK);
    for (int64_t i = 0; i < x.size; i++) x.data[i] = (float)(i % 17) / 17;
    char in[128], dir[128], path[256];
    fl_err e = {0};
    snprintf(in, sizeof in, "%s/rl.npy", tmp);
    assert_int_equal(fl_npy_write_tensor(in, &x, &e), FL_OK);
    fl_tensor_free(&x);
    snprintf(dir, sizeof dir, "%s/rl_all", tmp);
    expect(run(1, F "nn run -m %s -i %s -l all --outdir %s -o %s/rl_y.npy", lenet, in, dir, tmp),
           0, "wrote");
    static const char *const every[] = {"conv1_Conv_output_0", "relu1_Relu_output_0",
                                        "pool2_MaxPool_output_0", "logits"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s.npy", dir, every[i]);
        if (!file_exists(path)) fail_msg("-l all did not write %s", path);
    }
    snprintf(dir, sizeof dir, "%s/rl_two", tmp);
    expect(run(1, F "nn run -m %s -i %s --layers /conv1/Conv_output_0,/relu2/Relu_output_0 "
                    "--layer /pool1/MaxPool_output_0 --outdir %s -o %s/rl_y.npy", lenet, in, dir,
               tmp), 0, "pool1_MaxPool_output_0");
    static const char *const two[] = {"conv1_Conv_output_0", "relu2_Relu_output_0",
                                      "pool1_MaxPool_output_0"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s.npy", dir, two[i]);
        if (!file_exists(path)) fail_msg("NAME,NAME did not write %s", path);
    }
    snprintf(path, sizeof path, "%s/relu1_Relu_output_0.npy", dir);
    assert_false(file_exists(path)); /* only what was asked for */
    /* --layer-times: a row per node, products with their GFLOP/s, the sgemm it is set against */
    res r = run(1, F "nn run -m %s -i %s -o %s/rl_y.npy --layer-times 3", lenet, in, tmp);
    expect((res){r.rc, strdup(r.out)}, 0, "median of 3 passes, batch 2");
    assert_contains(r.out, "/conv1/Conv ");
    assert_contains(r.out, "bare sgemm 1024^3");
    const char *row = strstr(r.out, "/conv1/Conv ");
    assert_non_null(row);
    assert_non_null(strchr(row, '%')); /* its share, then GFLOP/s: a product */
    free(r.out);
}

/* Typos: the closest command, group or flag is suggested; a far-off word gets no guess. */
static void test_did_you_mean(void **state) {
    expect(run(1, F "nn trian"), 2, "did you mean 'flare nn train'?");
    expect(run(1, F "agnets run"), 2, "did you mean 'agents'?");
    expect(run(1, F "nn train --epoch 3"), 2, "did you mean --epochs?");
    expect(run(1, F "nn cover --crtieria nc"), 2, "did you mean --criteria?");
    expect(run(1, F "agents fuzz --max-exec 3"), 2, "did you mean --max-execs?");
    expect(run(1, F "nn train -a lnet5 -o m.onnx"), 2, "did you mean lenet5?"); /* a value */
    res r = run(1, F "nn train --zzzzzz 3");
    if (strstr(r.out, "did you mean")) fail_msg("a guess for --zzzzzz:\n%s", r.out);
    expect(r, 2, "unknown flag --zzzzzz");
    r = run(1, F "nn frobnicate");
    if (strstr(r.out, "did you mean")) fail_msg("a guess for frobnicate:\n%s", r.out);
    expect(r, 2, "unknown command");
    /* layer names, checked before any data is read (the fixture model, no dataset needed) */
    const char *lenet = "tests/fixtures/cover/lenet1.onnx";
    r = run(1, F "nn sa -k dsa -m %s -l /pool2/MaxPool_outptu_0 --train a --test b", lenet);
    assert_contains(r.out, "lenet1.onnx has no layer");
    expect(r, 2, "did you mean /pool2/MaxPool_output_0?");
    expect(run(1, F "nn cover -m %s -l /pool2/MaxPol_output_0 -n 1", lenet), 2,
           "did you mean /pool2/MaxPool_output_0?");
    expect(run(1, F "nn lrp -m %s -l /conv1/Conv_output_1x -o %s/i.json", lenet, tmp), 2,
           "did you mean /conv1/Conv_output_0?");
    expect(run(1, F "nn quality --real a --fake b --features %s -l /relu2/Relu_outptu_0", lenet),
           2, "did you mean /relu2/Relu_output_0?");
}

/* Every --help ends with two or three examples, and each example parses: it runs with
 * --help added before any `--` (parsing stops at --help after checking what came before). */
static void test_help_examples(void **state) {
    for (int c = 0; c < CMD_COUNT_; c++) {
        int n = 0;
        for (int x = 0; example_table[x].args; x++) {
            if (example_table[x].cmd != c) continue;
            n++;
            char args[512];
            const char *dd = strstr(example_table[x].args, " -- ");
            if (dd)
                snprintf(args, sizeof args, "%.*s --help%s", (int)(dd - example_table[x].args),
                         example_table[x].args, dd);
            else
                snprintf(args, sizeof args, "%s --help", example_table[x].args);
            res r = run(1, F "%s %s", cmd_names[c], args);
            if (r.rc != 0) fail_msg("example of %s does not parse: %s\n%s", cmd_names[c], args, r.out);
            free(r.out);
        }
        if (n < 2 || n > 3) fail_msg("%s has %d examples", cmd_names[c], n);
        res h = run(0, F "%s --help", cmd_names[c]);
        const char *ex = strstr(h.out, "\nexamples:\n");
        if (!ex) fail_msg("%s --help has no examples", cmd_names[c]);
        char want[64];
        snprintf(want, sizeof want, "\n  flare %s ", cmd_names[c]);
        assert_contains(ex, want);
        free(h.out);
    }
    /* every missing required flag in one message */
    expect(run(1, F "nn train"), 2, "missing required flags --arch, --output");
    expect(run(1, F "nn sa -k lsa -m m.onnx"), 2, "missing: --layers, --train, --test");
    expect(run(1, F "nn sa -k lsa --test-ats a"), 2, "--train-ats, --train-pred, --test-pred are missing");
}

/* ---- runtime errors: exit 1, "flare: <library message>" ------------------------------------- */
static void test_runtime_errors(void **state) {
    res r = run(1, F "nn info --model %s/missing.onnx", tmp);
    assert_contains(r.out, "flare: ");
    expect(r, 1, "missing.onnx");
    expect(run(1, F "nn eval -m %s/missing.onnx", tmp), 1, "missing.onnx");
    char bad[128];
    snprintf(bad, sizeof bad, "%s/garbage.onnx", tmp);
    FILE *f = fopen(bad, "w");
    assert_non_null(f);
    fputs("this is not a protobuf", f);
    fclose(f);
    expect(run(1, F "nn info --model %s", bad), 1, "garbage.onnx");
    expect(run(1, F "nn train --arch mlp --data %s/nodata -o %s/m.onnx -s 1", tmp, tmp), 1,
           "nodata");
}

/* An output that cannot be written is reported as the user typed it ("parent folder ... does
 * not exist", "... is a directory"), never as the temporary file flare writes first, and
 * before any data is read. */
static void test_output_paths(void **state) {
    const char *lenet = "tests/fixtures/cover/lenet1.onnx";
    res r = run(1, F "nn run -m %s -i %s/none.npy -o %s/nodir/y.npy", lenet, tmp, tmp);
    if (strstr(r.out, ".tmp.")) fail_msg("a temporary file name:\n%s", r.out);
    expect(r, 1, "y.npy: parent folder");
    r = run(1, F "nn run -m %s -i %s/none.npy -o %s", lenet, tmp, tmp);
    expect(r, 1, " is a directory");
    r = run(1, F "nn train -a mlp -d %s/nodata -o %s/nodir/m.onnx", tmp, tmp);
    assert_contains(r.out, "does not exist");
    expect(r, 1, "nodir/m.onnx: parent folder");
    expect(run(1, F "nn lrp -m %s -d %s/nodata -o %s/nodir/i.json", lenet, tmp, tmp), 1,
           "i.json: parent folder");
    expect(run(1, F "nn profile -m %s -d %s/nodata -o %s/", lenet, tmp, tmp), 1,
           "is a directory");
}

/* An input that does not fit the model: the error names the model file. */
static void test_shape_errors_name_model(void **state) {
    int64_t shp[4] = {2, 1, 20, 20};
    fl_tensor x = {0};
    fl_err e = {0};
    assert_int_equal(fl_tensor_alloc(&x, 4, shp), FL_OK);
    char in[128];
    snprintf(in, sizeof in, "%s/small.npy", tmp);
    assert_int_equal(fl_npy_write_tensor(in, &x, &e), FL_OK);
    fl_tensor_free(&x);
    res r = run(1, F "nn run -m tests/fixtures/cover/lenet1.onnx -i %s -o %s/small_y.npy", in, tmp);
    assert_contains(r.out, "expects shape");
    expect(r, 1, "flare: tests/fixtures/cover/lenet1.onnx: input 'input'");
}

/* A command that fails leaves no partial outputs. */
static void test_no_partial_outputs(void **state) {
    char dir[128], path[256];
    /* agents fuzz with an empty seed folder: no output folder */
    snprintf(dir, sizeof dir, "%s/noseeds", tmp);
    assert_int_equal(mkdir(dir, 0755), 0);
    expect(run(1, F "agents fuzz -i %s -o %s/camp -E 1 -- true", dir, tmp), 1, "no seed files");
    snprintf(path, sizeof path, "%s/camp", tmp);
    struct stat st;
    if (stat(path, &st) == 0) fail_msg("%s was created", path);
    const char *lenet = "tests/fixtures/cover/lenet1.onnx";
    /* nn run whose input cannot be read: no --outdir folder */
    snprintf(path, sizeof path, "%s/run_layers", tmp);
    expect(run(1, F "nn run -m %s -i %s/none.npy -l all --outdir %s -o %s/run_y.npy", lenet, tmp,
               path, tmp), 1, "none.npy");
    if (stat(path, &st) == 0) fail_msg("%s was created", path);
    TU_NEED(have_data, "dataset-fashion-mnist (/usr/share/datasets/fashion-mnist)");
    /* nn sa -o x.npy --grid bad/path.png: no x.npy */
    snprintf(path, sizeof path, "%s/sa.npy", tmp);
    expect(run(1, F "nn sa -k dsa -m %s -l /pool2/MaxPool_output_0 --train fashion-mnist:train "
                    "--test fashion-mnist:test -n 50 -o %s --grid %s/bad/path.png", lenet, path,
               tmp), 1, "bad/path.png: parent folder");
    assert_false(file_exists(path));
    /* nn select whose grid cannot be written (a folder in its place): no .npy files */
    snprintf(dir, sizeof dir, "%s/sel", tmp);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/s.png", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    expect(run(1, F "nn select -m %s -d fashion-mnist:test -n 50 -N 5 -o %s/s.npy", lenet, dir), 1,
           "s.png is a directory");
    snprintf(path, sizeof path, "%s/s.npy", dir);
    assert_false(file_exists(path));
    snprintf(path, sizeof path, "%s/s.idx.npy", dir);
    assert_false(file_exists(path));
}

/* nn select's grid is labelled as fl_grid_label says (index, true and predicted class by
 * name; nn sa --grid uses the same function): the PNG equals one drawn here with those
 * labels from the selected images and the model's predictions. */
static void test_grid_labels(void **state) {
    TU_NEED(have_data, "dataset-fashion-mnist (/usr/share/datasets/fashion-mnist)");
    const char *L = "tests/fixtures/cover/lenet1.onnx";
    char out[160], p[200];
    snprintf(out, sizeof out, "%s/g.npy", tmp);
    expect(run(1, F "nn select -m %s -d fashion-mnist:test --limit 60 --number 6 -o %s -q", L, out), 0, NULL);
    fl_err e = {0};
    fl_model *m;
    fl_dataset *d;
    fl_tensor x = {0};
    fl_npy idx;
    assert_int_equal(fl_onnx_load(L, &m, &e), FL_OK);
    assert_int_equal(fl_dataset_load("fashion-mnist:test", NULL, 60, &d, &e), FL_OK);
    assert_int_equal(fl_npy_read_tensor(out, &x, &e), FL_OK);
    snprintf(p, sizeof p, "%s/g.idx.npy", tmp);
    assert_int_equal(fl_npy_read(p, &idx, &e), FL_OK);
    assert_int_equal(fl_model_forward(m, &x, &e), FL_OK);
    const fl_tensor *z = fl_model_output(m, 0);
    char text[6][160];
    const char *labels[6];
    for (int i = 0; i < 6; i++) {
        int best = 0;
        for (int k = 1; k < z->shape[1]; k++)
            if (z->data[i * z->shape[1] + k] > z->data[i * z->shape[1] + best]) best = k;
        int64_t j = ((int64_t *)idx.data)[i];
        fl_grid_label(d, j, best, NULL, text[i], sizeof text[i]);
        labels[i] = text[i];
        char want[64];
        snprintf(want, sizeof want, "#%lld\n%s\n->", (long long)j, d->class_names[d->y[j]]);
        assert_memory_equal(text[i], want, strlen(want));
    }
    snprintf(p, sizeof p, "%s/g.want.png", tmp);
    assert_int_equal(fl_image_grid_write_scaled(p, x.data, 6, 1, 28, 28, 6, labels, &d->scale, &e),
                     FL_OK);
    res r = run(0, "cmp %s %s/g.png && echo same", p, tmp);
    expect(r, 0, "same");
    fl_npy_free(&idx);
    fl_tensor_free(&x);
    fl_dataset_free(d);
    fl_model_free(m);
}

/* nn cover's text output says which layer and bounds lsc / dsc used (chosen or given). */
static void test_cover_text(void **state) {
    TU_NEED(have_data, "dataset-fashion-mnist (/usr/share/datasets/fashion-mnist)");
    res r = run(0, F "nn cover -m tests/fixtures/cover/lenet1.onnx -c lsc:10,dsc:20::0:5 "
                     "-l /relu2/Relu_output_0 --train fashion-mnist:train -n 50 -q");
    assert_contains(r.out, "lsc:10: layer /relu2/Relu_output_0 (12 neurons), 10 buckets over [");
    assert_contains(r.out, "(bounds from 1000 training inputs' SA)");
    expect(r, 0, "dsc:20::0:5: layer /relu2/Relu_output_0 (12 neurons), 20 buckets over [0, 5]\n");
    r = run(0, F "nn cover -m tests/fixtures/cover/lenet1.onnx -c dsc -l /relu2/Relu_output_0 "
                 "--train fashion-mnist:train -n 50 -q --json");
    cJSON *j = parse_json(r.out);
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "criteria"), 0);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(c0, "detail");
    assert_true(cJSON_IsString(d));
    assert_contains(d->valuestring, "layer /relu2/Relu_output_0");
    cJSON_Delete(j);
    free(r.out);
}

/* nn eval: a class with no images says "no images" (null in JSON), not an accuracy of 0. */
static void test_eval_empty_classes(void **state) {
    TU_NEED(have_data, "dataset-fashion-mnist (/usr/share/datasets/fashion-mnist)");
    /* the first 3 test images are of classes 9, 2 and 1 */
    res r = run(0, F "nn eval -m tests/fixtures/cover/lenet1.onnx -n 3");
    assert_contains(r.out, "T-shirt/top");
    if (!strstr(r.out, "0  T-shirt/top") || !strstr(strstr(r.out, "0  T-shirt/top"), "no images"))
        fail_msg("class 0 has no images:\n%s", r.out);
    expect(r, 0, "Ankle boot");
    r = run(0, F "nn eval -m tests/fixtures/cover/lenet1.onnx -n 3 --json");
    cJSON *j = parse_json(r.out);
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(j, "classes");
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cls, 0), "accuracy")));
    assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cls, 9), "accuracy")));
    cJSON_Delete(j);
    free(r.out);
}

/* nn info shows a symbolic dimension by the name the file declares, in inputs and outputs
 * (here the fixture's "N"s, renamed "B" and "M" in place: same length, so no protobuf length
 * changes). */
static void test_info_symbolic_dims(void **state) {
    uint8_t *buf;
    size_t len;
    fl_err e = {0};
    assert_int_equal(fl_file_read("tests/fixtures/cover/lenet1.onnx", &buf, &len, &e), FL_OK);
    static const char dim[] = "\x12\x01N\n\x02\x08\x01"; /* dim_param "N", then dim 1 */
    uint8_t *at = NULL;
    for (size_t i = 0; i + sizeof dim - 1 <= len && !at; i++)
        if (!memcmp(buf + i, dim, sizeof dim - 1)) at = buf + i;
    assert_non_null(at);
    at[2] = 'B';
    static const char odim[] = "\x12\x01N\n\x02\x08\x0a"; /* the output's: [N,10] */
    at = NULL;
    for (size_t i = 0; i + sizeof odim - 1 <= len && !at; i++)
        if (!memcmp(buf + i, odim, sizeof odim - 1)) at = buf + i;
    assert_non_null(at);
    at[2] = 'M';
    char path[128];
    snprintf(path, sizeof path, "%s/named.onnx", tmp);
    assert_int_equal(fl_file_write_atomic(path, buf, len, &e), FL_OK);
    free(buf);
    res t = run(0, F "nn info -m %s", path);
    assert_contains(t.out, "output  logits [M,10]");
    expect(t, 0, "input   input [B,1,28,28]");
    res r = run(0, F "nn info -m %s --json", path);
    cJSON *j = parse_json(r.out);
    const cJSON *in = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "inputs"), 0);
    const cJSON *names = cJSON_GetObjectItemCaseSensitive(in, "dim_names");
    assert_string_equal(cJSON_GetArrayItem(names, 0)->valuestring, "B");
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(names, 1)));
    const cJSON *out = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "outputs"), 0);
    names = cJSON_GetObjectItemCaseSensitive(out, "dim_names");
    assert_string_equal(cJSON_GetArrayItem(names, 0)->valuestring, "M");
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(out, "shape"), 1)->valueint, 10);
    cJSON_Delete(j);
    free(r.out);
}

/* -q means one thing everywhere: stderr is silent (no notes, progress or status) unless
 * something fails, and stdout, the results, is the same with and without it. */
static void test_quiet(void **state) {
    TU_NEED(have_data, "dataset-fashion-mnist (/usr/share/datasets/fashion-mnist)");
    const char *L = "tests/fixtures/cover/lenet1.onnx";
    char cmds[8][512];
    int n = 0;
    snprintf(cmds[n++], 512, "nn info -m %s", L);
    snprintf(cmds[n++], 512, "nn eval -m %s -n 50", L);
    snprintf(cmds[n++], 512, "nn run -m %s -i fashion-mnist:test -n 5 -l all --outdir %s/q -o %s/q.npy", L, tmp, tmp);
    snprintf(cmds[n++], 512, "nn sa -k dsa -m %s -l /pool2/MaxPool_output_0 --train fashion-mnist:train "
             "--test fashion-mnist:test -n 50 --buckets 10", L);
    snprintf(cmds[n++], 512, "nn lrp -m %s -n 50 -o %s/q.json", L, tmp);
    snprintf(cmds[n++], 512, "nn select -m %s -d fashion-mnist:test -n 50 -N 5 -o %s/qs.npy", L, tmp);
    snprintf(cmds[n++], 512, "nn profile -m %s -n 50 -o %s/q.prof", L, tmp);
    snprintf(cmds[n++], 512, "nn cover -m %s -n 50 -p %s/q.prof", L, tmp);
    for (int i = 0; i < n; i++) {
        res loud = run(0, F "%s", cmds[i]);
        res quiet = run(0, F "%s -q", cmds[i]);
        res err = run(0, "{ " F "%s -q 2>&1 >/dev/null; }", cmds[i]);
        if (loud.rc || quiet.rc) fail_msg("%s: exit %d / %d", cmds[i], loud.rc, quiet.rc);
        if (!quiet.out[0]) fail_msg("%s -q printed no results", cmds[i]);
        if (strcmp(loud.out, quiet.out))
            fail_msg("%s: stdout differs with -q:\n%s\n--- -q:\n%s", cmds[i], loud.out, quiet.out);
        if (err.out[0]) fail_msg("%s -q wrote to stderr:\n%s", cmds[i], err.out);
        free(loud.out), free(quiet.out), free(err.out);
    }
}

/* ---- the round trip -------------------------------------------------------------------------- */
static void test_train(void **state) {
    TU_NEED(have_data, "dataset-fashion-mnist (/usr/share/datasets/fashion-mnist)");
    char stats[128];
    snprintf(model, sizeof model, "%s/mlp.onnx", tmp);
    snprintf(stats, sizeof stats, "%s/mlp.jsonl", tmp);
    res r = run(1, F "nn train --arch mlp --data fashion-mnist --limit 512 --epochs 1 --seed 42 "
                     "--threads 1 --stats %s -o %s", stats, model);
    assert_contains(r.out, "seed 42");
    assert_contains(r.out, "epoch 1/1");
    assert_contains(r.out, "test_acc");
    assert_null(strchr(r.out, '\r')); /* not a terminal: no bar, one line per epoch */
    expect(r, 0, NULL);
    assert_true(file_exists(model));

    /* JSON lines: start, one per epoch, end */
    uint8_t *buf;
    size_t len;
    fl_err e = {0};
    assert_int_equal(fl_file_read(stats, &buf, &len, &e), FL_OK);
    buf = realloc(buf, len + 1);
    buf[len] = 0;
    const char *events[3] = {"start", "epoch", "end"};
    char *save = NULL, *line = strtok_r((char *)buf, "\n", &save);
    for (int i = 0; i < 3; i++, line = strtok_r(NULL, "\n", &save)) {
        assert_non_null(line);
        cJSON *j = parse_json(line);
        const cJSON *ev = cJSON_GetObjectItemCaseSensitive(j, "event");
        assert_true(cJSON_IsString(ev));
        assert_string_equal(ev->valuestring, events[i]);
        if (i == 0) {
            assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "seed")->valuestring, "42");
            assert_int_equal(num(j, "n_train"), 512);
            assert_int_equal(num(j, "threads"), 1);
        } else if (i == 1) {
            assert_true(num(j, "train_loss") > 0);
            double acc = num(j, "test_acc");
            assert_true(acc >= 0 && acc <= 1);
            assert_true(num(j, "train_acc") > 0.2); /* 512 images, 1 epoch: well above 0.1 */
        } else {
            assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "model")->valuestring, model);
        }
        cJSON_Delete(j);
    }
    assert_null(line);
    free(buf);
}

/* Same seed, same thread count: the same model, byte for byte. Run on a pretend terminal to
 * see the progress bar redraw with \r. */
static void test_train_reproducible_with_bar(void **state) {
    TU_NEED(have_data, "dataset-fashion-mnist (/usr/share/datasets/fashion-mnist)");
    if (!file_exists(model)) TU_SKIP("%s missing: test_train did not write it", model);
    char again[128];
    snprintf(again, sizeof again, "%s/again.onnx", tmp);
    res r = run(1, "FLARE_PROGRESS=tty " F "nn train -a mlp -n 512 -e 1 -s 42 -t 1 -o %s", again);
    assert_non_null(strchr(r.out, '\r'));
    assert_contains(r.out, "img/s");
    expect(r, 0, "epoch 1/1");
    uint8_t *a, *b;
    size_t na, nb;
    fl_err e = {0};
    assert_int_equal(fl_file_read(model, &a, &na, &e), FL_OK);
    assert_int_equal(fl_file_read(again, &b, &nb, &e), FL_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    free(a);
    free(b);
    char stats[128];
    snprintf(stats, sizeof stats, "%s/again.stats.jsonl", tmp); /* the default stats path */
    assert_true(file_exists(stats));
}

/* The epochs recorded so far in the statistics file being written (STATS.tmp), once at least
 * `want` are there or after a minute. */
static int wait_epochs(const char *stats, int want) {
    char tmpf[160];
    snprintf(tmpf, sizeof tmpf, "%s.tmp", stats);
    int epochs = 0;
    for (int tries = 0; tries < 1200 && epochs < want; tries++) {
        usleep(50000);
        uint8_t *buf;
        size_t len;
        fl_err e = {0};
        if (fl_file_read(tmpf, &buf, &len, &e) != FL_OK) continue;
        epochs = 0;
        for (size_t i = 0; i + 15 < len; i++) epochs += !memcmp(buf + i, "\"event\":\"epoch\"", 15);
        free(buf);
    }
    return epochs;
}

/* nn train of an MLP for "ever" (it is stopped with stop_train), output to log, in the
 * background. */
static pid_t start_train(const char *log, const char *stats, const char *m) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        FILE *f = freopen(log, "w", stdout);
        if (!f || dup2(fileno(stdout), 2) < 0) _exit(99);
        execl(getenv("FLARE_BIN"), "flare", "nn", "train", "-a", "mlp", "-n", "2000", "-e", "100000", "-s", "1",
              "-t", "1", "--stats", stats, "-o", m, (char *)NULL);
        _exit(98);
    }
    return pid;
}

/* Ctrl-C to a start_train; its exit status. */
static int stop_train(pid_t pid) {
    int st;
    assert_int_equal(kill(pid, SIGINT), 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* nn train failing partway (its output folder removed during training, so the model cannot be
 * written): exit 1 naming the model, and no statistics file, neither STATS nor STATS.tmp. */
static void test_train_fails_partway(void **state) {
    TU_NEED(have_data, "dataset-fashion-mnist (/usr/share/datasets/fashion-mnist)");
    char dir[128], m[160], stats[128], log[128];
    snprintf(dir, sizeof dir, "%s/gone", tmp);
    snprintf(m, sizeof m, "%s/m.onnx", dir);
    snprintf(stats, sizeof stats, "%s/gone.stats.jsonl", tmp);
    snprintf(log, sizeof log, "%s/gone.log", tmp);
    assert_int_equal(mkdir(dir, 0755), 0);
    pid_t pid = start_train(log, stats, m);
    assert_true(wait_epochs(stats, 1) >= 1);
    assert_int_equal(rmdir(dir), 0); /* empty: the model is written only at the end */
    assert_int_equal(stop_train(pid), 1);
    res r = run(0, "cat %s", log);
    assert_contains(r.out, "m.onnx");
    free(r.out);
    char tmpf[160];
    snprintf(tmpf, sizeof tmpf, "%s.tmp", stats);
    assert_false(file_exists(stats));
    assert_false(file_exists(tmpf));
}

/* Ctrl-C in nn train: it says so, exits 130, writes the model of the last finished epoch (its
 * accuracy is the one the stats file recorded for that epoch) and closes the stats file with
 * an "interrupted" end line. */
static void test_train_ctrl_c(void **state) {
    TU_NEED(have_data, "dataset-fashion-mnist (/usr/share/datasets/fashion-mnist)");
    char m[128], stats[128], log[128];
    snprintf(m, sizeof m, "%s/int.onnx", tmp);
    snprintf(stats, sizeof stats, "%s/int.stats.jsonl", tmp);
    snprintf(log, sizeof log, "%s/int.log", tmp);
    pid_t pid = start_train(log, stats, m);
    assert_true(wait_epochs(stats, 2) >= 2); /* two finished, then interrupt the third */
    assert_false(file_exists(stats));        /* until the end, the lines are in STATS.tmp */
    assert_int_equal(stop_train(pid), 130);
    res r = run(0, "cat %s", log);
    assert_contains(r.out, "stopped by Ctrl-C during epoch");
    free(r.out);
    /* the stats file: its last line is the end, naming the epochs kept */
    r = run(0, "tail -n 1 %s", stats);
    cJSON *end = parse_json(r.out);
    free(r.out);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(end, "event")->valuestring, "end");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(end, "interrupted")));
    int kept = (int)num(end, "epochs_done");
    r = run(0, "grep -c '\"event\":\"epoch\"' %s", stats);
    assert_int_equal(atoi(r.out), kept);
    free(r.out);
    double want = num(end, "test_acc"); /* the last finished epoch's */
    cJSON_Delete(end);
    assert_true(file_exists(m));
    r = run(0, F "nn eval -m %s -n 2000 --json", m);
    assert_int_equal(r.rc, 0);
    cJSON *ev = parse_json(r.out);
    assert_float_equal(num(ev, "accuracy"), want, 1e-12);
    cJSON_Delete(ev);
    free(r.out);
}

static void test_info(void **state) {
    if (!file_exists(model)) TU_SKIP("%s missing: test_train did not write it", model);
    fl_err e = {0};
    fl_model *m;
    assert_int_equal(fl_onnx_load(model, &m, &e), FL_OK);
    char total[64];
    snprintf(total, sizeof total, "total parameters: %lld", (long long)fl_model_param_count(m));

    res r = run(1, F "nn info --model %s", model);
    assert_contains(r.out, "Gemm");
    assert_contains(r.out, fl_model_input_name(m, 0));
    expect(r, 0, total);

    r = run(0, F "nn info --model %s --json", model);
    assert_int_equal(r.rc, 0);
    cJSON *j = parse_json(r.out);
    assert_int_equal(num(j, "params"), fl_model_param_count(m));
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(j, "layers");
    assert_true(cJSON_IsArray(layers) && cJSON_GetArraySize(layers) >= 3);
    const cJSON *l0 = cJSON_GetArrayItem(layers, 0);
    assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(l0, "op")));
    assert_true(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(l0, "shape")));
    const cJSON *in = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "inputs"), 0);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(in, "name")->valuestring,
                        fl_model_input_name(m, 0));
    cJSON_Delete(j);
    free(r.out);
    fl_model_free(m);
}

static void test_eval(void **state) {
    if (!file_exists(model)) TU_SKIP("%s missing: test_train did not write it", model);
    res r = run(0, F "nn eval --model %s --data fashion-mnist:test --limit 300 --json", model);
    assert_int_equal(r.rc, 0);
    cJSON *j = parse_json(r.out);
    double acc = num(j, "accuracy");
    assert_true(acc >= 0 && acc <= 1);
    assert_int_equal(num(j, "n"), 300);
    assert_true(num(j, "loss") > 0);
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(j, "classes");
    assert_int_equal(cJSON_GetArraySize(cls), 10);
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cls, 9), "name")->valuestring,
        "Ankle boot");
    /* the confusion matrix counts every image once; its diagonal is the correct ones */
    const cJSON *cm = cJSON_GetObjectItemCaseSensitive(j, "confusion");
    assert_int_equal(cJSON_GetArraySize(cm), 10);
    double sum = 0, diag = 0;
    for (int t = 0; t < 10; t++)
        for (int p = 0; p < 10; p++) {
            double v = cJSON_GetArrayItem(cJSON_GetArrayItem(cm, t), p)->valuedouble;
            sum += v;
            if (t == p) diag += v;
        }
    assert_int_equal(sum, 300);
    assert_int_equal(diag, num(j, "correct"));
    assert_float_equal(acc, diag / 300, 1e-9);
    cJSON_Delete(j);
    free(r.out);

    r = run(1, F "nn eval -m %s -n 300 -b 64", model);
    assert_contains(r.out, "accuracy");
    assert_contains(r.out, "Ankle boot");
    expect(r, 0, "confusion matrix");
}

/* Three images through the CLI: logits and a hidden layer match the library's forward pass. */
static void test_run(void **state) {
    if (!file_exists(model)) TU_SKIP("%s missing: test_train did not write it", model);
    fl_err e = {0};
    fl_model *m;
    assert_int_equal(fl_onnx_load(model, &m, &e), FL_OK);
    fl_layer_info *L;
    assert_true(fl_model_layers(m, &L, &e) >= 2);
    char layer[128], part[128];
    snprintf(layer, sizeof layer, "%s", L[0].name);
    free(L);
    /* the documented file name rule: characters other than [A-Za-z0-9._-] become '_', and
     * leading '_' / '.' are dropped */
    size_t k = 0;
    for (const char *p = layer; *p; p++) {
        char c = (strchr("-_.", *p) || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
                  (*p >= 'A' && *p <= 'Z')) ? *p : '_';
        if (k || (c != '_' && c != '.')) part[k++] = c;
    }
    part[k] = 0;

    int64_t shp[4] = {3, 1, 28, 28};
    fl_tensor x = {0};
    assert_int_equal(fl_tensor_alloc(&x, 4, shp), FL_OK);
    fl_rng rng;
    fl_rng_seed(&rng, 5);
    for (int64_t i = 0; i < x.size; i++) x.data[i] = fl_rng_uniform(&rng);
    char in[128], out[128], lpath[300];
    snprintf(in, sizeof in, "%s/x.npy", tmp);
    snprintf(out, sizeof out, "%s/y.npy", tmp);
    assert_int_equal(fl_npy_write_tensor(in, &x, &e), FL_OK);

    res r = run(1, F "nn run --model %s --input %s --layer '%s' -o %s", model, in, layer, out);
    expect(r, 0, "wrote");
    assert_int_equal(fl_model_forward(m, &x, &e), FL_OK);
    snprintf(lpath, sizeof lpath, "%s/y.%s.npy", tmp, part);
    const char *files[2] = {out, lpath};
    const fl_tensor *want[2] = {fl_model_output(m, 0), fl_model_tensor(m, layer)};
    for (int f = 0; f < 2; f++) {
        fl_tensor got = {0};
        if (fl_npy_read_tensor(files[f], &got, &e) != FL_OK) fail_msg("%s", e.msg);
        assert_true(fl_tensor_same_shape(&got, want[f]));
        for (int64_t i = 0; i < got.size; i++) assert_float_equal(got.data[i], want[f]->data[i], 0);
        fl_tensor_free(&got);
    }
    assert_int_equal(want[0]->shape[0], 3);

    /* --outdir: the layer goes to DIR/NAME.npy */
    r = run(1, F "nn run -m %s -i %s -l '%s' -o %s --outdir %s/layers", model, in, layer, out, tmp);
    expect(r, 0, NULL);
    snprintf(lpath, sizeof lpath, "%s/layers/%s.npy", tmp, part);
    assert_true(file_exists(lpath));

    /* a misspelt layer: usage error suggesting the real name */
    char typo[128];
    snprintf(typo, sizeof typo, "%.*s", (int)strlen(layer) - 2, layer);
    r = run(1, F "nn run -m %s -i %s -l '%s' -o %s", model, in, typo, out);
    assert_contains(r.out, "did you mean");
    expect(r, 2, layer);
    fl_tensor_free(&x);
    fl_model_free(m);
}

/* ---- fixture -------------------------------------------------------------------------------- */
static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    return remove(path);
}

static int setup(void **state) {
    if (!getenv("FLARE_BIN")) setenv("FLARE_BIN", "build/flare", 1);
    unsetenv("FLARE_PROGRESS");
    snprintf(tmp, sizeof tmp, "/tmp/flare_test_cli_XXXXXX");
    if (!mkdtemp(tmp)) return -1;
    have_data = access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", R_OK) == 0;
    return access(getenv("FLARE_BIN"), X_OK);
}

static int teardown(void **state) {
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* nn fuzz / nn retrain through the binary: a campaign, its folder, a refused re-use, a resume,
 * bad input that leaves nothing behind. */
static void test_fuzz(void **state) {
    TU_NEED(have_data, "dataset-fashion-mnist (/usr/share/datasets/fashion-mnist)");
    if (!file_exists(model)) TU_SKIP("%s missing: test_train did not write it", model);
    char out[128], path[192];
    snprintf(out, sizeof out, "%s/fuzz", tmp);
    expect(run(1, F "nn fuzz -m %s --seeds fashion-mnist:test --limit 50 -c kmnc:10 -o %s -E 100",
               model, out), 1, "profile");
    assert_false(file_exists(out));
    res r = run(1, F "nn fuzz -m %s --seeds fashion-mnist:test --limit 50 -o %s -E 400 -s 3 -j 1",
                model, out);
    assert_contains(r.out, "seed 3");
    assert_contains(r.out, "coverage   nc:0.75");
    expect(r, 0, "report");
    static const char *const files[] = {"fuzzer_stats", "plot_data", "summary.json", "report.html"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", out, files[i]);
        assert_true(file_exists(path));
    }
    expect(run(1, F "nn fuzz -m %s --seeds fashion-mnist:test -o %s -E 100", model, out), 1, "-i -");
    expect(run(1, F "nn fuzz -m %s --seeds - -o %s -E 200 -q", model, out), 0, "execs");
    expect(run(1, F "nn fuzz -m %s --seeds - -o %s -E 200 --strategy random", model, out), 1,
           "strategy");
    expect(run(1, F "nn retrain -m %s -o %s/r.onnx", model, tmp), 2, "--extra");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_help_texts),
        cmocka_unit_test(test_arch_choices_match_zoo),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_required_flags),
        cmocka_unit_test(test_vocabulary),
        cmocka_unit_test(test_did_you_mean),
        cmocka_unit_test(test_run_layer_sets),
        cmocka_unit_test(test_help_examples),
        cmocka_unit_test(test_runtime_errors),
        cmocka_unit_test(test_output_paths),
        cmocka_unit_test(test_shape_errors_name_model),
        cmocka_unit_test(test_no_partial_outputs),
        cmocka_unit_test(test_quiet),
        cmocka_unit_test(test_grid_labels),
        cmocka_unit_test(test_cover_text),
        cmocka_unit_test(test_eval_empty_classes),
        cmocka_unit_test(test_info_symbolic_dims),
        cmocka_unit_test(test_train),
        cmocka_unit_test(test_train_reproducible_with_bar),
        cmocka_unit_test(test_train_ctrl_c),
        cmocka_unit_test(test_train_fails_partway),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_eval),
        cmocka_unit_test(test_run),
        cmocka_unit_test(test_fuzz),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
