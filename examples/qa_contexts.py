"""The contexts and questions of movie_qa.json, written by hand for bertlab (fictional films and people:
any likeness to a real one is chance). `make_examples.py` turns them into SQuAD's format, finding each
answer's character offset in its context (an answer must appear in its context word for word)."""

CONTEXTS = [
    ("The Salt Road is a 2009 drama directed by Mara Eklund. It follows a retired fisherman who walks from "
     "his village to the capital to return a letter he found in a bottle. The film was shot in eleven weeks "
     "on the western coast, and most of its cast were local villagers rather than professional actors. "
     "Critics praised the long silent scenes, although some found the ending too sudden.",
     [("Who directed The Salt Road?", "Mara Eklund"),
      ("In which year was The Salt Road released?", "2009"),
      ("How long did the shooting of The Salt Road take?", "eleven weeks"),
      ("What did critics praise in The Salt Road?", "the long silent scenes"),
      ("Who made up most of the cast?", "local villagers")]),
    ("Paper Lanterns is an animated comedy about a family of lanterns that come to life during a city "
     "festival. The voice of the youngest lantern, Pip, belongs to the singer Tomas Reyes. The animators "
     "spent three years on the film, and the final festival sequence alone took nine months. Paper Lanterns "
     "won the audience award at the Lisbon Animation Days in 2016.",
     [("What kind of film is Paper Lanterns?", "an animated comedy"),
      ("Who voices Pip?", "Tomas Reyes"),
      ("How many years did the animators spend on Paper Lanterns?", "three years"),
      ("Which award did Paper Lanterns win?", "the audience award"),
      ("How long did the final festival sequence take?", "nine months")]),
    ("In Glass Harbour, a detective named Ines Varga investigates the disappearance of a lighthouse keeper. "
     "The story takes place during a single winter night, and nearly every scene is lit only by torches and "
     "the lighthouse beam. The score, written by the composer Leo Hart, uses nothing but a cello and a "
     "church organ. The film runs for one hundred and four minutes.",
     [("What is the detective's name?", "Ines Varga"),
      ("Who has disappeared in Glass Harbour?", "a lighthouse keeper"),
      ("When does the story of Glass Harbour take place?", "during a single winter night"),
      ("Which instruments does the score use?", "a cello and a church organ"),
      ("How long is Glass Harbour?", "one hundred and four minutes")]),
    ("Summer of the Red Kite tells the story of two sisters who spend a summer at their grandfather's farm. "
     "The older sister wants to become a pilot, while the younger one tries to tame a wild kite that nests "
     "in the barn. The screenplay was written by Ada Lind, who based it on her own childhood. Although the "
     "film had a small budget, it was shown in more than forty countries.",
     [("Where do the two sisters spend the summer?", "at their grandfather's farm"),
      ("What does the older sister want to become?", "a pilot"),
      ("Who wrote the screenplay?", "Ada Lind"),
      ("What did Ada Lind base the screenplay on?", "her own childhood"),
      ("In how many countries was the film shown?", "more than forty countries")]),
    ("Iron Orchard is a science fiction film set on a space station that grows apples for a dying Earth. "
     "The gardener Kofi Mensah discovers that the station's computer has been hiding a second, secret "
     "harvest. The station set was built at full size in a former aircraft hangar. Many reviewers said the "
     "first half was tense but the second half was slow.",
     [("Where is Iron Orchard set?", "on a space station"),
      ("What does the station grow?", "apples"),
      ("Who discovers the secret harvest?", "Kofi Mensah"),
      ("Where was the station set built?", "in a former aircraft hangar"),
      ("What did reviewers say about the second half?", "the second half was slow")]),
    ("The Last Tram is a short film of only eighteen minutes. A tram driver on her final shift before "
     "retirement meets a boy who has missed his stop. The whole film was recorded in one continuous shot "
     "inside a real tram that kept running through the city at night. Its director, Petra Novak, had "
     "worked as a tram driver for six years before studying film.",
     [("How long is The Last Tram?", "eighteen minutes"),
      ("Whom does the tram driver meet?", "a boy who has missed his stop"),
      ("How was the whole film recorded?", "in one continuous shot"),
      ("Who directed The Last Tram?", "Petra Novak"),
      ("How many years did the director work as a tram driver?", "six years")]),
    ("Brass and Feathers is a musical about a village band that enters a national competition. The band's "
     "leader, an old trumpet player called Sam Okafor, must find a new drummer a week before the contest. "
     "The songs were recorded live on set instead of in a studio, which gives the film a rough, warm sound. "
     "The film was a modest success in cinemas and later became popular on television.",
     [("What kind of film is Brass and Feathers?", "a musical"),
      ("What does the village band enter?", "a national competition"),
      ("What instrument does Sam Okafor play?", "trumpet"),
      ("Where were the songs recorded?", "live on set"),
      ("Where did the film later become popular?", "on television")]),
    ("Wolves of Saint Agnes is a horror film about a group of students trapped in a mountain school during "
     "a snowstorm. The director, Jonas Weber, avoided computer effects and used trained dogs and puppets for "
     "the wolves. The film was made for a very small budget of two hundred thousand euros. Audiences "
     "laughed at the puppets, but many admired the sound design.",
     [("Where are the students trapped?", "in a mountain school"),
      ("What traps the students?", "a snowstorm"),
      ("What did Jonas Weber use for the wolves?", "trained dogs and puppets"),
      ("What was the budget of the film?", "two hundred thousand euros"),
      ("What did many in the audience admire?", "the sound design")]),
    ("Letters to Valparaiso is a romantic drama told almost entirely through letters read aloud. A sailor "
     "and a librarian write to each other for twenty years without meeting. The actress Lucia Moreno plays "
     "the librarian at three different ages, with the help of careful make-up. The film ends at the harbour "
     "of Valparaiso, where the two finally meet.",
     [("How is the story of Letters to Valparaiso told?", "through letters read aloud"),
      ("For how long do the sailor and the librarian write to each other?", "twenty years"),
      ("Who plays the librarian?", "Lucia Moreno"),
      ("How many ages does the librarian appear at?", "three different ages"),
      ("Where does the film end?", "at the harbour of Valparaiso")]),
    ("Clockwork Kitchen is a comedy set in a busy restaurant where every machine has broken down on the "
     "night of a famous critic's visit. The head chef, Bruno Rossi, cooks a seven-course dinner with only a "
     "camping stove. Much of the dialogue was improvised by the cast during rehearsals. The film was shot in "
     "a real restaurant that stayed open for customers during the day.",
     [("Where is Clockwork Kitchen set?", "in a busy restaurant"),
      ("Who is visiting the restaurant?", "a famous critic"),
      ("What does Bruno Rossi cook with?", "only a camping stove"),
      ("How many courses does the dinner have?", "seven-course"),
      ("Who improvised much of the dialogue?", "the cast")]),
]
