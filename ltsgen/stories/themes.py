"""Story themes: what the hero loves to do, with its own sentences, so that stories differ in topic."""

from __future__ import annotations

from ltsgen.stories.grammar import parse_sections

# @<theme>_love: how the setup says it; @<theme>: sentences on the way (A acts, B is beside A).
THEMES_TEXT = r"""
@paint_love
to paint pictures with bright colors
to paint everything {H_he} saw

@paint
{A} took out {A_his} little paints and painted the {pthing}.
{A} mixed {colour} and {colour} paint to make a new color.
"Hold still, {B}," said {A}. "I want to paint you."
{A} painted a small picture of {P} and gave it to {B}.
{A} wished {A_he} had more {colour} paint for the {pthing}.
There was paint on {A_his} nose, and {B} laughed.
{A} made a picture of {here} to show {home_person} later.
{A} painted the {colour_sky} sky with {A_his} finger.

@music_love
to sing and play music
to make music with anything {H_he} could find

@music
{A} tapped a song on a log with two sticks.
{A} sang a little song about {song_about}, and {B} sang along.
{A} hummed a tune that {home_person} liked.
{A} made a drum from an old box and played it.
The song of {psound} was like music to {A}.
{A} and {B} made up a new song with a funny ending.
{P} sat still and listened when {A} sang.
{A} whistled a happy tune as they went.

@bake_love
to bake cakes and cookies with {home_person}
to help in the kitchen

@bake
{A} thought about the cookies {home_person} made on Sundays.
"When we get home, I will bake a cake for everyone," said {A}.
{A} shared the last cookie from {A_his} bag with {B}.
The smell of {psmell} made {A} think of warm bread.
{A} told {B} how to make pancakes, step by step.
{A} wished {A_he} had a sweet bun to give to {P}.
"A pie with {fruit} would be so good now," said {B}.
{A} counted the cookies in {A_his} bag. There were just enough.

@build_love
to build things with sticks and blocks
to build little houses and towers

@build
{A} built a little tower of stones by the path.
{A} made a tiny house of sticks for the bugs.
{A} and {B} built a small bridge of twigs over a puddle.
{A} found a good flat stone and put it on top of {A_his} tower.
"When I grow up, I will build a real house," said {A}.
{A} looked at the {pthing} and wondered how to build one.
{B} held the sticks, and {A} tied them with grass.
{A} made a little boat of bark and let it float.

@garden_love
to plant seeds and watch them grow
to look after the flowers in the garden

@garden
{A} found some seeds and put them in {A_his} pocket to plant at home.
{A} knew the names of all the flowers by the path.
{A} watered a little plant with the last of {A_his} water.
"This flower needs more sun," said {A}, and moved it a bit.
{A} showed {B} how a seed turns into a plant.
{A} smelled a wild rose and smiled.
{A} picked a {colour} flower for {home_person}.
{A} told {P} not to step on the little plants.

@count_love
to count everything
to count the stars at night

@count
{A} counted the {pthing}: one, two, three, four, five.
{A} counted {A_his} steps all the way to the next tree.
"I counted ten birds!" said {A}. "No, eleven!"
{A} and {B} counted the clouds, but the clouds kept moving.
{A} counted how many times {P} {pet_sound}.
{A} wanted to count all the stones by the path.
"How many {pthing} do you think there are?" asked {A}.
{A} lost count and had to start again.

@read_love
to read books and hear stories
to look at picture books in bed

@read
{A} told {B} a story from {A_his} favorite book.
This place looked just like a picture in one of {A_his} books.
"In my book, a brave {animal_word} went on a trip like this," said {A}.
{A} thought about the book {home_person} read to {A_him} at night.
{A} made up a new story about the {pthing}.
"One day, I will write a book about this," said {A}.
{A} knew a story about a {animal_word} who lived by the {pthing}.
{A} told the story slowly, and {B} listened.

@dance_love
to dance and spin
to dance to any song

@dance
{A} did a little dance on the path.
{A} spun around and around until {A_he} was dizzy.
{A} and {B} held hands and danced in a circle.
{P} jumped around as if {P_he} wanted to dance too.
{A} danced like a leaf in the wind.
"Dance with me, {B}!" said {A}, and they both laughed.
{A} hopped from one foot to the other.
{A} made up a new dance and called it the {colour} dance.

@collect_love
to collect shells, stones and feathers
to keep little treasures in a box

@collect
{A} found a {nice} stone and put it in {A_his} pocket.
{A} picked up a feather for {A_his} box of treasures at home.
"This one is for my box," said {A}, holding a tiny shell.
{A} looked for {colour} stones, because {A_he} did not have one yet.
{A} showed {B} {A_his} pocket full of little treasures.
{A} put the best leaf in {A_his} pocket, so it would not break.
{B} gave {A} a {nice} pebble for {A_his} box.
{A} had so many treasures that {A_his} pockets were full.

@bugs_love
to look at bugs and little animals
to watch ants and bees

@bugs
{A} lay down to watch a line of ants.
{A} saw a ladybug with seven spots on a leaf.
"Look, a {small_animal}!" said {A}. "Be very quiet."
{A} let a little bug walk on {A_his} hand.
{A} knew that bees like {colour} flowers.
A snail left a shiny line on a stone, and {A} followed it.
{A} showed {B} a beetle that was blue and green.
{A} told {P} not to eat the little bugs.
"""

THEMES = ("paint", "music", "bake", "build", "garden", "count", "read", "dance", "collect", "bugs")
THEME_SECTIONS = parse_sections(THEMES_TEXT)
