"""The data model: token-exact episodes (``episode``), chat rendering (``chat_renderer``), recording
(``episode_builder``), record and replay (``jsonl``), the task of an episode (``tasks``) and the summary
numbers of a batch (``episode_stats``)."""
