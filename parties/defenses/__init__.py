"""Built-in defenses (registered in ``vfl.privacy.defenses.DEFENSES`` on import): label DP by randomized
response (plain and with a prior), label-DP gradient perturbation, noise and top-k sparsification of the gradient the label holder sends down, Marvell, MID's bottleneck at the server, CAE/DCAE's confused labels, and the parties' NoPeek dCor penalty."""

from parties.defenses import cae, forward, gradient, label, label_gp, marvell, mid, rr_prior  # noqa: F401  (importing registers them)
from parties.defenses.cae import CAE, DCAE
from parties.defenses.forward import Dcor, arm_forward
from parties.defenses.gradient import GradNoise, GradTopK, gradient_mod
from parties.defenses.label import LabelRR
from parties.defenses.label_gp import LabelGP
from parties.defenses.marvell import Marvell
from parties.defenses.mid import MID
from parties.defenses.rr_prior import LabelRRPrior

__all__ = ["CAE", "DCAE", "Dcor", "GradNoise", "GradTopK", "LabelGP", "LabelRR", "LabelRRPrior", "MID", "Marvell", "arm_forward", "gradient_mod"]
