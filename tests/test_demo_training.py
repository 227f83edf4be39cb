"""Checkpoint averaging and early stopping of the demo model's training."""

import torch

from models.demo.train import average_weights, stalled


def test_average_weights_is_the_elementwise_mean(tmp_path):
    paths = []
    for number, value in enumerate((1.0, 2.0, 6.0)):
        path = tmp_path / f"step-{number}.pt"
        torch.save({"w": torch.full((2, 3), value), "b": torch.tensor([value, -value])}, path)
        paths.append(path)
    mean = average_weights(paths)
    assert torch.equal(mean["w"], torch.full((2, 3), 3.0))
    assert torch.equal(mean["b"], torch.tensor([3.0, -3.0]))


def test_training_stops_when_the_best_dev_loss_is_patience_snapshots_old():
    assert not stalled({}, 2)
    history = {"100": 2.5, "200": 2.4, "300": 2.45}
    assert not stalled(history, 2)
    assert stalled({**history, "400": 2.41}, 2)
    assert not stalled({**history, "400": 2.3}, 2)
