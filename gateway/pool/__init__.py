"""The fixed pool of PipelineUnits: claim, cancel scopes, quarantine-drain, recovery."""
