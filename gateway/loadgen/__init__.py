"""The load generator (``voice-gateway loadtest``): simulated callers holding multi-turn
conversations with a gateway over real WebRTC, as a deployment is sized with (LiveKit's
``lk perf agent-load-test`` does the same for its agents).

- :mod:`~gateway.loadgen.speech`: the questions (real recordings) and where their speech ends;
- :mod:`~gateway.loadgen.turns`: waiting on a call's server events for one turn's answer;
- :mod:`~gateway.loadgen.caller`: one caller's conversation (connect, ask, listen, think, hang up);
- :mod:`~gateway.loadgen.watch`: what the gateway says of its load (``/v1/pool``, ``/metrics``);
- :mod:`~gateway.loadgen.report`: the tables and the plot (SVG);
- :mod:`~gateway.loadgen.run`: the phases (the lone caller, then N callers), the gateway process.

It is a client of the gateway: it imports the WebRTC client (``gateway.client``) and media
helpers, nothing of the server side.
"""
