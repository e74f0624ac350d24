"""Whether a transcript cut in a pause still stands for the turn so far, by the VAD chunks after
its cut: the pause's speculative transcript (``gateway.pipeline.vad``) and a draft cut in a dip
of the speech (``gateway.pipeline.drafts``) follow the same rule, kept here."""

from __future__ import annotations

# A chunk this likely to be speech but under the turn's threshold is *quiet*: the quiet end of a
# word, a fricative like the "s" of "France", which a transcript cut before it lacks, so it ends a
# standing cut (the finished turn is transcribed whole instead); but only until a *still* chunk
# (under it) followed the cut: a word's tail runs on from the word, and a quiet chunk after a still
# one (a breath, a click: jfk's "country." 0.06, 0.04, then 0.13 on the chunk that ended the turn) is
# no word the transcript lacks. Before, that chunk voided the pause's transcript and the turn was
# transcribed again after its end (~420 ms of Whisper, stop 48).
QUIET_ABOVE = 0.1


class StandingCut:
    """One transcript cut's standing: ``stands`` while nothing but silence followed the cut (a
    voiced chunk ends it; a quiet one, :data:`QUIET_ABOVE` up to the turn's threshold, too, unless
    a still chunk came first). Each chunk method returns True when that chunk ended it. One VAD
    stage thread only."""

    def __init__(self) -> None:
        self.stands = False
        self._still = False  # a still chunk followed the cut while it stood

    def cut(self, stands: bool = True) -> None:
        """A transcript was cut here: it stands (``stands`` False: cut at a voiced chunk, it never does)."""
        self.stands, self._still = stands, False

    def drop(self) -> bool:
        """It stands no more (the turn ended or goes on); True if it stood."""
        stood = self.stands
        self.stands = self._still = False
        return stood

    def voiced(self) -> bool:
        """A voiced chunk: the caller went on."""
        return self.drop()

    def quiet(self) -> bool:
        """A quiet chunk: a word's tail, unless a still chunk came after the cut."""
        return False if self._still else self.drop()

    def still(self) -> None:
        """A still chunk (silence): from now on a quiet one leaves it standing."""
        self._still = self.stands
