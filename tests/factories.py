from __future__ import annotations

import factory

from accounts.models import Agent, Person, Team


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team

    slug = factory.Sequence(lambda n: f"team-{n}")
    name = factory.LazyAttribute(lambda team: team.slug.title())


class AgentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Agent

    team = factory.SubFactory(TeamFactory)
    slug = factory.Sequence(lambda n: f"agent-{n}")
    name = factory.LazyAttribute(lambda agent: agent.slug.title())


class PersonFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Person

    team = factory.SubFactory(TeamFactory)
    external_id = factory.Sequence(lambda n: f"person-{n}")
