"""The serving rewrite (grad_reverse.serving.rewrite) on in-memory graphs, no
SavedModel on disk: every GradReverse/GradReverseGrad node is replaced, and
the rewritten graph, run in a session, gives the forward bit for bit and the
gradient with the kernel's rounding in every dtype. Fast enough to select for
the mutation check; the end-to-end make-servable tests live in
test_serving_make_servable.py."""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import meta_graph_pb2

import grad_reverse
from grad_reverse import reference
from grad_reverse.serving import rewrite
from helpers.tensors import assert_bitwise_equal, random_tensor

LAMBDA = 0.3


def rewritten_graph(dtype):
    """(MetaGraphDef rewritten in place, its changes, input names, output names)
    of a function returning y and dx of grad_reverse."""

    @tf.function
    def forward_backward(x, dy, lambda_):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = grad_reverse.grad_reverse(x, lambda_)
        return y, tape.gradient(y, x, output_gradients=dy)

    concrete = forward_backward.get_concrete_function(
        tf.TensorSpec([None], dtype), tf.TensorSpec([None], dtype), tf.TensorSpec([], tf.float32)
    )
    meta_graph = meta_graph_pb2.MetaGraphDef()
    meta_graph.graph_def.CopyFrom(concrete.graph.as_graph_def())
    op_types = {node.op for node in meta_graph.graph_def.node}
    assert {"GradReverse", "GradReverseGrad"} <= op_types, op_types  # something to rewrite
    changes = rewrite.rewrite_meta_graph(meta_graph)
    return meta_graph, changes, [t.name for t in concrete.inputs], [t.name for t in concrete.outputs]


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16, tf.float32, tf.float64], ids=lambda d: d.name)
def test_rewritten_graph_has_no_op_of_ours_and_computes_the_same_bits(dtype):
    meta_graph, changes, inputs, outputs = rewritten_graph(dtype)
    assert not {"GradReverse", "GradReverseGrad"} & {node.op for node in meta_graph.graph_def.node}
    assert changes.total("GradReverse") == 1 and changes.total("GradReverseGrad") == 1
    x = random_tensor([67], dtype, seed=1)
    dy = random_tensor([67], dtype, seed=2)
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(meta_graph.graph_def, name="")
    with tf.compat.v1.Session(graph=graph) as session:
        y, dx = session.run(outputs, dict(zip(inputs, [x.numpy(), dy.numpy(), np.float32(LAMBDA)])))
    assert_bitwise_equal(y, x)
    assert_bitwise_equal(dx, reference.reverse_gradient(dy, tf.constant(LAMBDA)))
