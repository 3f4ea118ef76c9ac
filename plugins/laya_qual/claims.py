"""The claim catalogue: every property the qualification suite can vouch for.

A claim id is stable (reports from different releases are compared by id); its
statement says exactly what a ``passed`` verdict means. docs/claims.md is
generated from this module (``laya-qual claims --markdown``) and a test keeps
the two equal.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str

    @property
    def area(self) -> str:
        return self.id.split(".", 1)[0]


def _catalogue(*claims: Claim) -> dict[str, Claim]:
    ids = [c.id for c in claims]
    duplicated = {i for i in ids if ids.count(i) > 1}
    if duplicated:
        raise ValueError(f"claim ids catalogued twice: {sorted(duplicated)}")
    return {c.id: c for c in claims}


CLAIMS: dict[str, Claim] = _catalogue(
    # --- artifact: artifact-v1 reading and writing -------------------------------
    Claim("artifact.roundtrip",
          "An artifact written by laya_qual.synth loads, and predicting the same request twice "
          "gives bitwise-identical probabilities and the same decision."),
    Claim("artifact.tamper",
          "Flipping any byte of any pinned file (every file role) makes loading fail with "
          "DigestMismatch naming that file."),
    Claim("artifact.paths",
          "A manifest path that escapes the artifact directory, or a pinned file that is a "
          "symlink, is refused with ArtifactError naming the path."),
    Claim("artifact.unlisted",
          "A file in the artifact directory that the manifest does not list is refused."),
    Claim("adapter.refuse.standalone",
          "A non-null `adapter` payload in the manifest is refused by load_artifact with "
          "UnsupportedAdapter."),
    # --- request: typed validation and budgets ------------------------------------
    Claim("request.budget",
          "A request whose rendering exceeds the head's sequence budget, or whose option count "
          "exceeds its option budget, is refused with BudgetExceeded; nothing is clipped."),
    Claim("request.validation",
          "A request with a wrong-typed or empty field, or an unknown task, is refused with "
          "RequestError naming the field."),
    # --- heads ---------------------------------------------------------------------
    Claim("heads.parity.int8",
          "An int8 head predicts within 0.02 absolute probability of the float32 head it was "
          "quantized from, with logit SQNR of at least 30 dB."),
    Claim("heads.calibration",
          "Probabilities are softmax(scores / temperature) and the decision is `act` exactly "
          "when the top probability reaches act_threshold and the runner-up stays below "
          "escalate_threshold."),
    # --- learner: laya.evolution (section owned by the evolution work) --------------
    # --- report: signed qualification report (section owned by the report work) -----
    Claim("report.verdicts",
          "Every catalogued claim appears in the report: `failed` if any of its tests failed, "
          "`passed` if one passed and none failed, otherwise `not evaluated`; the result is "
          "FAILED if any claim failed, WARNED if any was not evaluated, PASSED otherwise."),
    Claim("report.xdist-equal",
          "The report's claims, verdicts, test node ids and outcomes are identical whether the "
          "suite ran in-process (-n 0) or on xdist workers (-n 2)."),
    Claim("report.signature",
          "Every bundle line is a DSSE envelope whose Ed25519 signature over the DSSE PAE "
          "verifies with the signer's public key and fails with any other key."),
    Claim("report.interop",
          "A bundle signed by laya-qual verifies with securesystemslib's DSSE Envelope and "
          "Ed25519 key, and an envelope signed by securesystemslib verifies with laya-qual."),
    Claim("report.verify.tamper",
          "Changing any single byte of any bundle line makes `laya-qual verify` fail."),
    Claim("report.verify.agreement",
          "A validly signed statement that disagrees with its companion (result, test lists, "
          "subjects, claim verdicts vs evidence) makes `laya-qual verify` fail."),
    Claim("report.subjects",
          "Subject digests follow docs/report-format.md; changing one byte of one artifact file "
          "changes its digest and `laya-qual verify --artifact` fails."),
)
