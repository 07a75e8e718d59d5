"""A session's training: one head trained under each rule at one setting, then the
learning-rate sweep there, shown on the Training tab as they grow. Served, the steps run in
slices on the process's training thread (:func:`training.scheduler`); elsewhere (a notebook,
a document with no session) all at once."""

from __future__ import annotations

from tornado.ioloop import IOLoop

from . import core, training
from .argument import TRAINING_STEPS
from .documents import held, served
from .prose.text import training_refused_html
from .state import Setting


class TrainingRunner:
    """The training runs of one session's :class:`layout.View` and their sweep. ``runs``:
    rule -> core.SeededTraining, done or under way, trained at ``at`` (d_k, T, keys); ``sweep``:
    the learning-rate sweep at that setting (core.LearningRateSweep) or None; ``job``: a
    served run's training.Job (its runs, then its sweep) while under way."""

    def __init__(self, view) -> None:
        self.view = view
        self.runs: dict | None = None
        self.at: tuple | None = None
        self.sweep = None
        self.job = None
        self._shown_next = None     # the show of the job's slice, waiting on the document
        self._account = training.Account()     # this session's training time
        self._stops_with = None     # the document whose end stops a served run

    def runs_at(self, s: Setting) -> dict | None:
        """The runs on show, where they are trained at ``s`` (its width, temperature, keys and
        seed: the rule and the alignment do not change them)."""
        if self.runs is None:
            return None
        same = self.at == (s.d_k, s.temperature, s.keys) and all(
            run.seed == s.seed for run in self.runs.values())
        return self.runs if same else None

    def done_at(self, s: Setting) -> bool:
        """Whether the runs at ``s`` are all done."""
        runs = self.runs_at(s)
        return runs is not None and all(run.done for run in runs.values())

    def start(self, s: Setting) -> None:
        """Train one head under each rule at ``s``'s d_k, T and keys, from its seed and the
        next (core.TRAIN_SEEDS seeds), each rule at its own learning rate
        (core.rule_learning_rate). Served, the steps run in slices on the process's training
        thread (the session that has used the least training time first) while the page's
        curves grow, each slice shown on the server's loop, until the runs end or
        :meth:`stop`; then, the same way, the learning-rate sweep at their setting, its
        points shown as they arrive. A sweep kept from before shows at once. Start while the
        runs or their sweep are under way at this setting changes nothing; while the sweep of
        another setting is under way, it ends it. Past the runs under way allowed from the
        client's address, the status line says so."""
        if self.job is not None:
            if self.runs_at(s) is not None or self.sweep is None or self.sweep.done:
                return      # under way (the button is disabled while the runs are)
            self._end_slice()            # another setting's sweep under way: this one instead
        d_k, t, n = s.d_k, s.temperature, s.keys
        runs = {rule: core.start_seeds(d_k, rule, s.seed, temperature=t,
                                       steps=TRAINING_STEPS, n_keys=n)
                for rule in core.RULES}
        doc = self.view.root.document
        if not served(doc):
            self._take(runs, (d_k, t, n), s.seed)
            for run in runs.values():
                run.advance(TRAINING_STEPS + 1)
            self.show()
            return
        request = doc.session_context.request
        address = getattr(request, "remote_ip", None) or ""
        loop = IOLoop.current()
        job = training.scheduler().submit(
            self._account, address, training.run_steps(runs),
            lambda job, done: loop.add_callback(self._slice_done, job, done))
        if job is None:
            self.view.training_status.text = training_refused_html(
                training.scheduler().runs_per_address)
            self.view.train_button.disabled = False
            return
        self.job = job
        self._take(runs, (d_k, t, n), s.seed)
        self.view.train_button.disabled = True
        if doc is not self._stops_with:
            self._stops_with = doc
            doc.on_event("connection_lost", lambda event: self.stop())
            doc.on_session_destroyed(lambda session_context: self.stop(doc=False))
        self.show()
        tab = self.view.training_tab()
        self.view.show_question(tab.key, tab.question(s, running=True))

    def _take(self, runs: dict, at: tuple, seed: int) -> None:
        d_k, t, n = at
        self.runs, self.at = runs, at
        self.sweep = core.cached_sweep(d_k, t, seed, n, steps=TRAINING_STEPS)

    def _slice_done(self, job, done: bool) -> None:
        """On the server's loop, after a slice of ``job``: its show, on the document's next
        turn (Bokeh lets a served document change only in its callbacks)."""
        if job is not self.job:
            return
        self._shown_next = self.view.root.document.add_next_tick_callback(
            lambda: self._show_slice(job, done))

    def _show_slice(self, job, done: bool) -> None:
        """Show the slice; then the job's next slice, the sweep once the runs are done, or
        the end (a unit that failed, logged by the scheduler, ends it too)."""
        if job is not self.job:
            return
        self._shown_next = None
        if all(run.done for run in self.runs.values()) and self.sweep is None:
            first = next(iter(self.runs.values()))
            self.sweep = core.start_sweep(first.d_k, first.temperature, first.seed,
                                          first.n_keys, steps=TRAINING_STEPS, runs=self.runs)
        with held(self.view.root.document):
            self.show()
        if job.stopped:
            self.stop()
        elif not done:
            job.resume()
        elif not self.sweep.done:
            job.resume(training.sweep_steps(self.sweep))
        else:
            self.stop()

    def stop(self, doc: bool = True) -> None:
        """End a served run where it is: no step after the one under way, no slice left to
        show, and the Train button usable again on the server's next turn (Bokeh lets a
        served document change only in its callbacks); ``doc=False``: the session is gone,
        its document is left as it is."""
        if self.job is None:
            return
        self._end_slice(doc)
        document = self.view.root.document
        if doc and document is not None:
            document.add_next_tick_callback(self._enable_train)

    def _end_slice(self, doc: bool = True) -> None:
        """No step after the one under way and no slice left to show (``doc``: its show
        callback taken off the document)."""
        job, shown = self.job, self._shown_next
        self.job = self._shown_next = None
        job.stop()
        document = self.view.root.document
        if (doc and document is not None and shown is not None
                and shown in document.session_callbacks):
            document.remove_next_tick_callback(shown)

    def _enable_train(self) -> None:
        if self.job is None:
            self.view.train_button.disabled = False

    def show(self) -> None:
        """The runs and the sweep so far on the Training tab."""
        d_k, t, n = self.at
        if self.view.show_training(self.runs, d_k, t, n, self.sweep):
            self.view.train_button.disabled = False
