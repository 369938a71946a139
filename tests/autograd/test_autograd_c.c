/* The autograd layer from C: gradients of a small graph, grad_of without
 * touching .grad, the saved-tensor version check, a freed graph, hooks, and
 * a chain long enough that a recursive walk or free would overflow the
 * stack, and a graph built on two threads. EV_TEST_CONCURRENCY: a second
 * OS thread runs a backward of its own graph while this one does. */
#include <pthread.h>

#include "eagervm/autograd.h"
#include "tensor/tensor_test.h"

static ev_tensor *leaf(int n, const double *v)
{
    int64_t shape[1] = {n};
    ev_tensor *t = tensor_from(EV_FLOAT64, 1, shape, v);
    CHECK_OK(ev_ag_set_requires_grad(t, 1));
    return t;
}

static double grad_at(ev_tensor *t, int i)
{
    ev_tensor *g = ev_ag_grad(t);
    CHECK(g != NULL);
    double v[16];
    read_f64(g, v);
    ev_tensor_unref(g);
    return v[i];
}

static void test_mul_sum_backward(void)
{
    double xv[3] = {1, 2, 3}, wv[3] = {4, 5, 6};
    ev_tensor *x = leaf(3, xv), *w = leaf(3, wv), *y, *s;
    CHECK_OK(ev_ag_binary(&EX, EV_OP_MUL, x, w, &y));
    CHECK(ev_ag_requires_grad(y) && !ev_ag_is_leaf(y));
    CHECK_STR_CONTAINS(ev_ag_node_name(ev_ag_grad_fn(y)), "mul_backward");
    CHECK_OK(ev_ag_reduce(&EX, EV_REDUCE_SUM, y, 0, NULL, 0, &s));
    CHECK_OK(ev_ag_backward(&EX, 1, &s, NULL, 0));
    for (int i = 0; i < 3; i++) {
        CHECK(grad_at(x, i) == wv[i]);
        CHECK(grad_at(w, i) == xv[i]);
    }
    /* The graph was freed: a second backward says so. */
    CHECK_EQ(ev_ag_backward(&EX, 1, &s, NULL, 0), EV_ESTATE);
    CHECK_STR_CONTAINS(ev_last_message(), "second time");
    ev_tensor_unref(s);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
    ev_tensor_unref(w);
}

static void test_grad_of_leaves_grad_alone(void)
{
    double xv[2] = {3, -1};
    ev_tensor *x = leaf(2, xv), *y, *s, *g = NULL;
    CHECK_OK(ev_ag_binary(&EX, EV_OP_MUL, x, x, &y));
    CHECK_OK(ev_ag_reduce(&EX, EV_REDUCE_SUM, y, 0, NULL, 0, &s));
    CHECK_OK(ev_ag_grad_of(&EX, 1, &s, NULL, 1, &x, 0, 0, &g));
    double v[2];
    read_f64(g, v);
    CHECK(v[0] == 6 && v[1] == -2);
    CHECK(ev_ag_grad(x) == NULL);
    ev_tensor_unref(g);
    ev_tensor_unref(s);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
}

static void test_modified_saved_tensor_is_refused(void)
{
    static const ev_site fwd = {"model.c", "f", 10}, inplace = {"model.c", "f", 11};
    double xv[2] = {0.5, 1};
    ev_tensor *x = leaf(2, xv), *y, *s;
    ev_exec ex = EX;
    ex.site = &fwd;
    CHECK_OK(ev_ag_unary(&ex, EV_OP_EXP, x, &y));  /* saves its result */
    ex.site = &inplace;
    ev_tensor *one;
    CHECK_OK(ev_full(&ex, EV_FLOAT64, 0, NULL, ev_scalar_float(1), &one));
    CHECK_OK(ev_ag_binary_(&ex, EV_OP_ADD, y, one));
    CHECK_OK(ev_ag_reduce(&EX, EV_REDUCE_SUM, y, 0, NULL, 0, &s));
    CHECK_EQ(ev_ag_backward(&EX, 1, &s, NULL, 0), EV_ESTATE);
    CHECK_STR_CONTAINS(ev_last_message(), "saved by exp_backward at model.c:10");
    CHECK_STR_CONTAINS(ev_last_message(), "at model.c:11");
    ev_tensor_unref(one);
    ev_tensor_unref(s);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
}

static int hook_calls;
static int double_it(void *ctx, ev_tensor *g, ev_tensor **out)
{
    (void)ctx;
    hook_calls++;
    ev_tensor *two;
    CHECK_OK(ev_full(&EX, EV_FLOAT64, 0, NULL, ev_scalar_float(2), &two));
    CHECK_OK(ev_binary(&EX, EV_OP_MUL, g, two, out));
    ev_tensor_unref(two);
    return 0;
}

static int post_calls;
static int after_accumulate(void *ctx, ev_tensor *leaf_t)
{
    CHECK(ctx == (void *)&post_calls);
    ev_tensor *g = ev_ag_grad(leaf_t);
    CHECK(g != NULL);
    ev_tensor_unref(g);
    post_calls++;
    return 0;
}

/* x = w * 1; x[1:3] *= 2 through a view; sum(x * x): the base's gradient
 * goes through CopySlices, the view's elements doubled twice. Then
 * z = zeros; z[0:2] = w[0:2] (ev_ag_assign_): z's graph starts there. */
static void test_in_place_through_a_view(void)
{
    double wv[4] = {1, 2, 3, 4};
    double ones[4] = {1, 1, 1, 1}, twos[2] = {2, 2};
    int64_t four = 4, two = 2;
    ev_tensor *w = leaf(4, wv), *one = tensor_from(EV_FLOAT64, 1, &four, ones);
    ev_tensor *by2 = tensor_from(EV_FLOAT64, 1, &two, twos), *x, *v, *sq, *s;
    CHECK_OK(ev_ag_binary(&EX, EV_OP_MUL, w, one, &x));
    CHECK_OK(ev_ag_slice(&EX, x, 0, 1, 3, 1, &v));
    CHECK_OK(ev_ag_binary_(&EX, EV_OP_MUL, v, by2));
    CHECK_STR_CONTAINS(ev_ag_node_name(ev_ag_grad_fn(x)), "CopySlices");
    CHECK_STR_CONTAINS(ev_ag_node_name(ev_ag_grad_fn(v)), "as_strided_backward");
    CHECK_OK(ev_ag_binary(&EX, EV_OP_MUL, x, x, &sq));
    CHECK_OK(ev_ag_reduce(&EX, EV_REDUCE_SUM, sq, 0, NULL, 0, &s));
    CHECK_OK(ev_ag_backward(&EX, 1, &s, NULL, 0));
    /* d/dw sum((c w)^2) = 2 c^2 w with c = 2 on the view's elements. */
    double want[4] = {2, 16, 24, 8};
    for (int i = 0; i < 4; i++) {
        CHECK(grad_at(w, i) == want[i]);
    }
    ev_tensor_unref(s);
    ev_tensor_unref(sq);
    ev_tensor_unref(v);
    ev_tensor_unref(x);
    ev_tensor_unref(one);
    ev_tensor_unref(by2);

    ev_tensor *z, *part, *src, *zs;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT64, 1, (int64_t[]){4}, &z));
    CHECK_OK(ev_slice(z, 0, 0, 2, 1, &part));
    CHECK_OK(ev_ag_slice(&EX, w, 0, 2, 4, 1, &src));
    CHECK_OK(ev_ag_assign_(&EX, z, part, src));
    CHECK(ev_ag_requires_grad(z) && !ev_ag_is_leaf(z));
    CHECK_EQ(ev_ag_assign_(&EX, w, part, src), EV_EINVAL); /* not w's elements */
    CHECK_STR_CONTAINS(ev_last_message(), "does not share");
    CHECK_OK(ev_ag_set_grad(w, NULL));
    CHECK_OK(ev_ag_reduce(&EX, EV_REDUCE_SUM, z, 0, NULL, 0, &zs));
    CHECK_OK(ev_ag_backward(&EX, 1, &zs, NULL, 0));
    double want2[4] = {0, 0, 1, 1};
    for (int i = 0; i < 4; i++) {
        CHECK(grad_at(w, i) == want2[i]);
    }
    ev_tensor_unref(zs);
    ev_tensor_unref(src);
    ev_tensor_unref(part);
    ev_tensor_unref(z);
    ev_tensor_unref(w);
}

static void test_hooks(void)
{
    double xv[1] = {1};
    ev_tensor *x = leaf(1, xv), *y;
    CHECK_OK(ev_ag_register_hook(x, double_it, NULL, NULL));
    CHECK_OK(ev_ag_register_post_accumulate_hook(x, after_accumulate, &post_calls, NULL));
    CHECK_OK(ev_ag_unary(&EX, EV_OP_SIN, x, &y));
    CHECK_OK(ev_ag_backward(&EX, 1, &y, NULL, 0));
    CHECK(close_enough(grad_at(x, 0), 2 * cos(1.0), 1e-15));
    CHECK_EQ(hook_calls, 1);
    CHECK_EQ(post_calls, 1);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
}

/* Returns a gradient of two elements, whatever it was given. */
static int resize_it(void *ctx, ev_tensor *g, ev_tensor **out)
{
    (void)ctx;
    (void)g;
    CHECK_OK(ev_zeros(&EX, EV_FLOAT64, 1, (int64_t[]){2}, out));
    return 0;
}

static void test_a_hook_cannot_change_the_gradients_shape(void)
{
    double xv[1] = {1};
    ev_tensor *x = leaf(1, xv), *y;
    CHECK_OK(ev_ag_register_hook(x, resize_it, NULL, NULL));
    CHECK_OK(ev_ag_unary(&EX, EV_OP_SIN, x, &y));
    CHECK_EQ(ev_ag_backward(&EX, 1, &y, NULL, 0), EV_EINVAL);
    CHECK_STR_CONTAINS(ev_last_message(), "tensor of [2] float64 for a gradient of [1] float64");
    CHECK(ev_ag_grad(x) == NULL);
    ev_tensor_unref(y);
    ev_tensor_unref(x);
}

static void test_long_chain(void)
{
    double xv[1] = {1};
    ev_tensor *x = leaf(1, xv), *y = ev_tensor_ref(x), *one;
    CHECK_OK(ev_full(&EX, EV_FLOAT64, 0, NULL, ev_scalar_float(1), &one));
    for (int i = 0; i < 300000; i++) {
        ev_tensor *next;
        CHECK_OK(ev_ag_binary(&EX, EV_OP_MUL, y, one, &next));
        ev_tensor_unref(y);
        y = next;
    }
    CHECK_OK(ev_ag_backward(&EX, 1, &y, NULL, 1));
    CHECK(grad_at(x, 0) == 1);
    ev_tensor_unref(y); /* frees 300,000 nodes without recursing */
    ev_tensor_unref(one);
    ev_tensor_unref(x);
}

static void test_grad_mode(void)
{
    double xv[1] = {1};
    ev_tensor *x = leaf(1, xv), *y;
    CHECK(ev_ag_is_grad_enabled());
    CHECK_EQ(ev_ag_set_grad_enabled(0), 1);
    CHECK_OK(ev_ag_unary(&EX, EV_OP_SIN, x, &y));
    CHECK(!ev_ag_requires_grad(y));
    CHECK_EQ(ev_ag_set_grad_enabled(1), 0);
    ev_tensor_unref(y);
    int64_t shape[1] = {1};
    ev_tensor *i;
    CHECK_OK(ev_zeros(&EX, EV_INT64, 1, shape, &i));
    CHECK_EQ(ev_ag_set_requires_grad(i, 1), EV_EINVAL);
    ev_tensor_unref(i);
    ev_tensor_unref(x);
}

static void *other_thread(void *arg)
{
    (void)arg;
    for (int k = 0; k < 200; k++) {
        double xv[2] = {1, 2};
        ev_tensor *x = leaf(2, xv), *y, *s;
        CHECK_OK(ev_ag_unary(&EX, EV_OP_TANH, x, &y));
        CHECK_OK(ev_ag_reduce(&EX, EV_REDUCE_SUM, y, 0, NULL, 0, &s));
        CHECK_OK(ev_ag_backward(&EX, 1, &s, NULL, 0));
        CHECK(close_enough(grad_at(x, 1), 1 - tanh(2.0) * tanh(2.0), 1e-12));
        ev_tensor_unref(s);
        ev_tensor_unref(y);
        ev_tensor_unref(x);
    }
    return NULL;
}

static void test_two_threads_two_graphs(void)
{
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, other_thread, NULL), 0);
    other_thread(NULL);
    CHECK_EQ(pthread_join(t, NULL), 0);
}

/* A node made on a thread that has made few nodes, from the output of one
 * made on a thread that has made many: grad_of's pruning visits a node's
 * inputs' nodes first, so the new node must still order after them. */
typedef struct mul_job {
    ev_tensor *y, *w, *s;
} mul_job;

static void *mul_sum_on_fresh_thread(void *arg)
{
    mul_job *j = arg;
    ev_tensor *z;
    CHECK_OK(ev_ag_binary(&EX, EV_OP_MUL, j->y, j->w, &z));
    CHECK_OK(ev_ag_reduce(&EX, EV_REDUCE_SUM, z, 0, NULL, 0, &j->s));
    ev_tensor_unref(z);
    return NULL;
}

static void test_graph_across_threads(void)
{
    double xv[2] = {1, 2}, wv[2] = {3, 4}, ones[2] = {1, 1};
    int64_t shape[1] = {2};
    ev_tensor *x = leaf(2, xv), *w = leaf(2, wv), *y = ev_tensor_ref(x);
    ev_tensor *one = tensor_from(EV_FLOAT64, 1, shape, ones);
    for (int k = 0; k < 1000; k++) { /* y = x + 1000, node by node */
        ev_tensor *next;
        CHECK_OK(ev_ag_binary(&EX, EV_OP_ADD, y, one, &next));
        ev_tensor_unref(y);
        y = next;
    }
    mul_job j = {y, w, NULL};
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, mul_sum_on_fresh_thread, &j), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    ev_tensor *g = NULL;
    CHECK_OK(ev_ag_grad_of(&EX, 1, &j.s, NULL, 1, &x, 0, 0, &g));
    double v[2];
    read_f64(g, v);
    CHECK(v[0] == 3 && v[1] == 4);
    ev_tensor_unref(g);
    ev_tensor_unref(j.s);
    ev_tensor_unref(y);
    ev_tensor_unref(one);
    ev_tensor_unref(x);
    ev_tensor_unref(w);
}

int main(void)
{
    test_setup();
    RUN_TEST(test_mul_sum_backward);
    RUN_TEST(test_grad_of_leaves_grad_alone);
    RUN_TEST(test_modified_saved_tensor_is_refused);
    RUN_TEST(test_in_place_through_a_view);
    RUN_TEST(test_hooks);
    RUN_TEST(test_a_hook_cannot_change_the_gradients_shape);
    RUN_TEST(test_long_chain);
    RUN_TEST(test_grad_mode);
    RUN_TEST(test_two_threads_two_graphs);
    RUN_TEST(test_graph_across_threads);
    test_teardown();
    return 0;
}
