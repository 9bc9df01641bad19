# A mute names a category or one note (issue 43): CategoryMute becomes Mute, its rows kept.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0003_ordering_by_team_id'),
        ('memory', '0011_read_as_of'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='categorymute',
            name='mute_unique_per_agent_category',
        ),
        migrations.RenameModel(
            old_name='CategoryMute',
            new_name='Mute',
        ),
        migrations.AlterField(
            model_name='mute',
            name='category',
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name='mute',
            name='note',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='mutes', to='memory.note'),
        ),
        migrations.AddIndex(
            model_name='mute',
            index=models.Index(fields=['team', 'agent'], name='mute_team_agent'),
        ),
        migrations.AddConstraint(
            model_name='mute',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('note__isnull', True), models.Q(('category', ''), _negated=True)), models.Q(('note__isnull', False), ('category', '')), _connector='OR'), name='mute_category_xor_note'),
        ),
        migrations.AddConstraint(
            model_name='mute',
            constraint=models.UniqueConstraint(condition=models.Q(('note__isnull', True)), fields=('team', 'person', 'agent', 'category'), name='mute_unique_per_agent_category'),
        ),
        migrations.AddConstraint(
            model_name='mute',
            constraint=models.UniqueConstraint(condition=models.Q(('note__isnull', False)), fields=('team', 'person', 'agent', 'note'), name='mute_unique_per_agent_note'),
        ),
    ]
