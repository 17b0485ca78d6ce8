"""The simulated world: ids, owners, tools, agents, suites, fixtures and the host core.

Nothing here knows about JSON bodies, paths or HTTP; the wire layer translates.
"""
