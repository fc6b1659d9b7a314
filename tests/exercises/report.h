/* report.h: how a checker tells a learner what is wrong (included by
 * check.c once).  report() compares one output with the values it should
 * have, element by element, and prints one line for it, right or wrong:
 * how many values are wrong, the first one's index, what was expected and
 * what came out, and why that value is expected when the exercise can say.
 * A checker reports every output, so that the right ones locate the bug
 * (dv right and dq wrong: P is right, the softmax's backward is not).
 *
 * Under a wrong output, one hint names the kind of mistake its values show,
 * the first of these that fits every value:
 *
 *   (the exercise's)     a typical mistake, computed by the checker, that
 *                        gives exactly these values: "the square mask"
 *   NaN?                 a value is NaN or infinite where a number belongs
 *   missing term?        every value is 0: nothing was written
 *   sign?                got = -expected
 *   scale?               got = c expected, with one c for every value
 *   transpose?           got is expected with its last two axes swapped
 *   off by one in time?  got is expected moved one step along an axis
 *   missing term?        none of these: a term left out, or one too many */
#include <stddef.h>

/* A mistake a learner makes often, and the values it gives. */
typedef struct mistake {
    const char *kind;     /* the hint's name: "missing term?", "off by one in time?" */
    const char *what;     /* what the mistake is, in a line */
    const double *values; /* what it gives: the output's size, NaN where it would be */
} mistake;

typedef struct output {
    const char *name;               /* "dq", "the mask (T 3, S 7)" */
    int ndim;                       /* 0: a scalar */
    const int *shape;
    const char *const *axes;        /* the axes' names ("t", "d"), or NULL */
    const double *got, *want;
    double abs, rel;                /* right: |got - want| <= abs + rel |want|;
                                       both 0: 1e-9 + 1e-6 |want| */
    const mistake *typical;         /* the exercise's typical mistakes */
    int ntypical;
    const char *nan_hint;           /* where a NaN comes from here, or NULL */
    /* Why want[i] is what it is ("query 0 sits at position 4 ..."), or NULL. */
    void (*why)(const int *idx, const void *ctx, char *buf, size_t len);
    const void *ctx;
} output;

static size_t count_of(const output *o)
{
    size_t n = 1;
    for (int i = 0; i < o->ndim; i++) n *= (size_t)o->shape[i];
    return n;
}

typedef struct tolerance {
    double abs, rel;
} tolerance;

static int near(double a, double b, tolerance tol)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return fabs(a - b) <= tol.abs + tol.rel * fabs(b);
}

static tolerance tol_of(const output *o)
{
    return o->abs > 0 || o->rel > 0 ? (tolerance){o->abs, o->rel} : (tolerance){1e-9, 1e-6};
}

/* Flat index i as "[t 1, d 0]" (or "[1, 0]" without axis names). */
static void index_str(const output *o, size_t i, int *idx, char *buf, size_t len)
{
    for (int a = o->ndim - 1; a >= 0; a--) idx[a] = (int)(i % (size_t)o->shape[a]), i /= (size_t)o->shape[a];
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int a = 0; a < o->ndim && n < len; a++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s%s%d", a ? ", " : "", o->axes ? o->axes[a] : "",
                              o->axes ? " " : "", idx[a]);
    if (n < len) snprintf(buf + n, len - n, "]");
}

/* got == values everywhere. */
static int all_match(const output *o, const double *values)
{
    for (size_t i = 0, n = count_of(o); i < n; i++)
        if (!near(o->got[i], values[i], tol_of(o))) return 0;
    return 1;
}

/* c with got = c want everywhere (c != 0, 1), or 0. */
static double common_factor(const output *o)
{
    size_t n = count_of(o), big = 0;
    for (size_t i = 1; i < n; i++)
        if (fabs(o->want[i]) > fabs(o->want[big])) big = i;
    if (fabs(o->want[big]) < 1e-12 || !isfinite(o->got[big])) return 0;
    double c = o->got[big] / o->want[big];
    if (fabs(c) < 1e-12 || fabs(c - 1) < 1e-9) return 0;
    for (size_t i = 0; i < n; i++)
        if (!near(o->got[i], c * o->want[i], tol_of(o))) return 0;
    return c;
}

/* c named the way a learner would meet it: 0.57735 = 1/sqrt(3). */
static void factor_str(double c, char *buf, size_t len)
{
    double a = fabs(c), sq = a * a;
    const char *sign = c < 0 ? "-" : "";
    if (fabs(a - round(a)) < 1e-9) snprintf(buf, len, "%g", c);
    else if (fabs(1 / a - round(1 / a)) < 1e-9) snprintf(buf, len, "%.6g = %s1/%g", c, sign, round(1 / a));
    else if (fabs(sq - round(sq)) < 1e-9) snprintf(buf, len, "%.6g = %ssqrt(%g)", c, sign, round(sq));
    else if (fabs(1 / sq - round(1 / sq)) < 1e-9) snprintf(buf, len, "%.6g = %s1/sqrt(%g)", c, sign, round(1 / sq));
    else snprintf(buf, len, "%.6g", c);
}

/* got is want with the last two axes swapped (R x C read as C x R). */
static int transposed(const output *o)
{
    if (o->ndim < 2) return 0;
    size_t R = (size_t)o->shape[o->ndim - 2], C = (size_t)o->shape[o->ndim - 1], n = count_of(o);
    if (R < 2 || C < 2) return 0;
    for (size_t b = 0; b < n; b += R * C)
        for (size_t i = 0; i < R; i++)
            for (size_t j = 0; j < C; j++)
                if (!near(o->got[b + j * R + i], o->want[b + i * C + j], tol_of(o))) return 0;
    return 1;
}

/* The axis along which got is want moved by one step (*step = +1: got at
 * index i holds want's at i - 1, late), or -1.  Only the values that have
 * a neighbour are compared; at least half of them must. */
static int shifted(const output *o, int *step)
{
    size_t n = count_of(o);
    for (int a = 0; a < o->ndim; a++) {
        size_t stride = 1;
        for (int b = a + 1; b < o->ndim; b++) stride *= (size_t)o->shape[b];
        size_t len = (size_t)o->shape[a];
        if (len < 3) continue;
        for (int d = 1; d >= -1; d -= 2) {
            size_t compared = 0, same = 0;
            for (size_t i = 0; i < n; i++) {
                size_t k = i / stride % len;
                if ((d > 0 && k == 0) || (d < 0 && k == len - 1)) continue;
                compared++;
                same += near(o->got[i], o->want[d > 0 ? i - stride : i + stride], tol_of(o));
            }
            if (compared && same == compared && 2 * compared >= n) return *step = d, a;
        }
    }
    return -1;
}

/* The hint for a wrong output: its kind, and what it means here. */
static void hint(const output *o)
{
    size_t n = count_of(o);
    for (int m = 0; m < o->ntypical; m++)
        if (all_match(o, o->typical[m].values)) {
            printf("      hint (%s): %s\n", o->typical[m].kind, o->typical[m].what);
            return;
        }
    for (size_t i = 0; i < n; i++)
        if (!isfinite(o->got[i]) && isfinite(o->want[i])) {
            printf("      hint (NaN?): %s\n", o->nan_hint ? o->nan_hint
                   : "a NaN or inf comes from 0 / 0, inf - inf, 0 * inf or exp of a large number");
            return;
        }
    size_t zeros = 0;
    for (size_t i = 0; i < n; i++) zeros += o->got[i] == 0;
    if (zeros == n) {
        printf("      hint (missing term?): every value is 0: was the result written at all?\n");
        return;
    }
    double c = common_factor(o);
    char name[64];
    int step, axis;
    if (c != 0 && fabs(c + 1) < 1e-9) printf("      hint (sign?): every value is minus the expected one\n");
    else if (c != 0) {
        factor_str(c, name, sizeof name);
        printf("      hint (scale?): every value is %s times the expected one\n", name);
    } else if (transposed(o)) printf("      hint (transpose?): the values are the expected ones with rows and columns swapped\n");
    else if ((axis = shifted(o, &step)) >= 0) {
        if (o->axes) snprintf(name, sizeof name, "%s", o->axes[axis]);
        else snprintf(name, sizeof name, "axis %d", axis);
        printf("      hint (off by one in time?): each value is the one expected at the %s %s: one step %s\n",
               step > 0 ? "previous" : "next", name, step > 0 ? "late" : "early");
    } else printf("      hint (missing term?): not a sign, scale, transpose or one-step shift of the expected "
                  "values: a term left out, or one too many?\n");
}

static int fails;

/* One line for output o, right or wrong; for a wrong one, where, why and
 * a hint.  Returns 1 when every value is right. */
static int report(const output *o)
{
    size_t n = count_of(o), wrong = 0, first = 0;
    for (size_t i = n; i-- > 0;)
        if (!near(o->got[i], o->want[i], tol_of(o))) wrong++, first = i;
    if (!wrong) {
        printf("  %s: right (%zu value%s)\n", o->name, n, n == 1 ? "" : "s");
        return 1;
    }
    fails++;
    int idx[8] = {0};
    char where[128], why[256] = "";
    index_str(o, first, idx, where, sizeof where);
    if (o->ndim == 0) printf("  %s: wrong: expected %.10g, got %.10g\n", o->name, o->want[0], o->got[0]);
    else printf("  %s: wrong at %zu of %zu values; first at %s: expected %.10g, got %.10g\n", o->name, wrong, n,
                where, o->want[first], o->got[first]);
    if (o->ndim >= 2) { /* which rows: often the place to look */
        size_t rows = (size_t)o->shape[0], per = n / rows, listed = 0;
        printf("      rows (%s) with a wrong value:", o->axes ? o->axes[0] : "axis 0");
        for (size_t r = 0; r < rows; r++)
            for (size_t i = r * per; i < (r + 1) * per; i++)
                if (!near(o->got[i], o->want[i], tol_of(o))) {
                    if (listed++ < 12) printf(" %zu", r);
                    break;
                }
        printf("%s\n", listed > 12 ? " ..." : "");
    }
    if (o->why) o->why(idx, o->ctx, why, sizeof why), printf("      why: %s\n", why);
    hint(o);
    return 0;
}
