"""The adversarial models' training step on PyTorch: the objective's gradients by
autograd (`backward()`, the reversal inside a `torch.autograd.Function`), then
the optimizers' update without gradient tracking, as Keras' own PyTorch step does."""

from __future__ import annotations

from typing import Any

import torch


def train_step(model: Any, data: Any) -> dict:
    batch = model.unpack_batch(data)
    x_source, x_target, y_source, sample_weight = batch
    model.zero_grad()
    lambda_ = model.current_lambda()
    total, label_loss, y_pred, logs, _ = model.objective(x_source, x_target, y_source, sample_weight, lambda_)
    model.optimizer.scale_loss(total).backward()
    gradients = [variable.value.grad for variable in model.trainable_variables]
    with torch.no_grad():
        model.apply_gradients(gradients)
        return model.record_step(label_loss, logs, lambda_, batch, y_pred)
