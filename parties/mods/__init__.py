"""Party-side mods (PBM quantization, LDP noise, fixed point, SecAgg masking) and their decoders."""

from parties.mods.encoding import (
    Encoded,
    fixed_point_mod,
    gaussian_mod,
    pack_counts_mod,
    pbm_mod,
    read_encoded,
    secagg_mod,
)

__all__ = ["Encoded", "fixed_point_mod", "gaussian_mod", "pack_counts_mod", "pbm_mod", "read_encoded",
           "secagg_mod"]
