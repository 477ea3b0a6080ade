from __future__ import annotations

from django.conf import settings
from django.db import models

from memoryadmin import policy

NAME_MAX = 100


class GraphDefinitionQuerySet(models.QuerySet):
    def visible_to(self, user) -> "GraphDefinitionQuerySet":
        """Members see their own graphs; operators and admins see every graph (memoryadmin.policy)."""
        return policy.restrict(self, user)


class GraphDefinition(models.Model):
    """A saved graph definition: the JSON of docs/graphs.md ("Saved definitions"), owned like a thread.

    ``valid`` and ``node_count`` are copied from the compile result each time the spec is
    saved, so lists show them without compiling every graph on every page.
    """

    name = models.CharField(max_length=NAME_MAX)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="graph_definitions")
    spec = models.JSONField()
    valid = models.BooleanField(default=False)
    node_count = models.IntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = GraphDefinitionQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="graphdef_owner_name_uniq"),
        ]
        indexes = [
            models.Index(fields=["-updated_at", "-id"], name="graphdef_updated_idx"),
            models.Index(fields=["owner", "-updated_at"], name="graphdef_owner_updated_idx"),
        ]

    def __str__(self) -> str:
        return self.name
