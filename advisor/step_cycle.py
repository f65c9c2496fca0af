"""Which optimizer step ends a training step, learned from the order the optimizers step in.

A loop with one optimizer ends its step at that optimizer's step. A GAN steps two, the
discriminator's and then the generator's, in one loop iteration: ended at each, every loop
iteration was two iterations of the profile, each half of the step tune times (DCGAN: 1.93 ms
against 3.88 ms); ended at the first optimizer's step alone, the iterations ran from the
generator's half of one loop iteration to the discriminator's half of the next, and the loop's
own host work (the next batch, logging) fell inside them, read as captured (full_iteration
predicted 11.82x, measured 6.70x; bench/results/paired_timing/multi_model_2026-11-26/).

So the bootstrap learns the cycle: the optimizers in the order they step, from the run's first
step up to the first one's next step (the run begins with a loop iteration, so the cycle begins
where the loop body does), and a step ends at the cycle's last optimizer. Until the cycle is
known every step ends one, as with one optimizer. Where the order departs from the cycle, an
optimizer built since it was learned (built anew each epoch) starts a new cycle, and any other
departure (a discriminator stepped more often than the generator) ends every step at each
optimizer's step for the rest of the run, as before there was a cycle: a wrong cycle would cut
steps across the loop's boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

MAX_CYCLE = 8   # optimizers in one step at most: a longer sequence without a repeat is no cycle


@dataclass
class StepCycle:
    """Fed each optimizer step (``ends``) with the optimizer's identity and how many optimizers
    the script has built so far; says whether that step ends the training step."""

    cycle: Optional[list] = None          # the learned order of optimizer identities, or None
    position: int = 0                     # the next expected index in ``cycle``
    learning: list = field(default_factory=list)   # the order seen since learning (re)started
    built_when_learned: int = 0           # optimizers built when the cycle was learned
    every_step: bool = False              # the order departed from the cycle: each step ends one

    def ends(self, key: int, built: int = 0) -> bool:
        if self.every_step:
            return True
        if self.cycle is not None:
            if key == self.cycle[self.position]:
                self.position = (self.position + 1) % len(self.cycle)
                return self.position == 0
            if built <= self.built_when_learned:   # an optimizer of the cycle's, out of order
                self.every_step, self.cycle = True, None
                return True
            self.cycle, self.learning = None, []   # built anew: learn the new cycle from here
        if self.learning and key == self.learning[0]:
            self.cycle, self.learning, self.built_when_learned = self.learning, [], built
            self.position = 1 % len(self.cycle)
            return self.position == 0
        # no repeat within MAX_CYCLE steps (an optimizer built for every step): start again here
        self.learning = self.learning + [key] if len(self.learning) < MAX_CYCLE else [key]
        return True
