-- Sample HR warehouse for the demo: database `hr` with the tables the examples reference.
CREATE DATABASE hr;
\connect hr
CREATE TABLE public.departments (id integer PRIMARY KEY, name text NOT NULL);
CREATE TABLE public.employees (
  id integer PRIMARY KEY,
  name text NOT NULL,
  salary numeric(12, 2),
  manager_id integer REFERENCES public.employees (id),
  department_id integer REFERENCES public.departments (id)
);
INSERT INTO public.departments VALUES (1, 'People'), (2, 'Data');
INSERT INTO public.employees VALUES (1, 'Ada', 200000, NULL, 2), (2, 'Grace', 150000, 1, 2), (3, 'Alan', 120000, 1, 1);
CREATE ROLE hr_reader LOGIN PASSWORD 'change-me';
GRANT USAGE ON SCHEMA public TO hr_reader;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO hr_reader;
