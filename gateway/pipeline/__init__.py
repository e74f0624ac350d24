"""What flows between the stage threads (``messages``, ``events``) and the stages that transform it."""
