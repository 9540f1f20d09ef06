"""Built-in defenses (registered in ``vfl.defenses.DEFENSES`` on import): label DP by randomized
response, noise and top-k sparsification of the gradient the label holder sends down, Marvell."""

from parties.defenses import gradient, label, marvell  # noqa: F401  (importing registers them)
from parties.defenses.gradient import GradNoise, GradTopK, gradient_mod
from parties.defenses.label import LabelRR
from parties.defenses.marvell import Marvell

__all__ = ["GradNoise", "GradTopK", "LabelRR", "Marvell", "gradient_mod"]
